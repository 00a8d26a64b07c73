import NIOCore
import NIOEmbedded
import NIOSSL
import Testing

@testable import ProxyEngine

/// What eager ALPN reads from a real ClientHello (NIOSSL's client's bytes).
@Suite struct TLSHelloTests {
    static func clientHello(alpn: [String]) throws -> ByteBuffer {
        let channel = EmbeddedChannel()
        var config = TLSConfiguration.makeClientConfiguration()
        config.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: config)
        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: context, serverHostname: "example.com"))
        try channel.connect(to: SocketAddress(ipAddress: "10.0.0.9", port: 443)).wait()
        var out = ByteBuffer()
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { out.writeBuffer(&buffer) }
        _ = try? channel.finish()
        return out
    }

    @Test func theClientsALPNListIsReadInItsOrder() throws {
        let hello = TLSHello.parse(try Self.clientHello(alpn: ["http/1.1", "h2", "acme-tls/1"]), expecting: 1)
        guard case let .found(found) = hello else {
            Issue.record("not parsed: \(hello)")
            return
        }
        #expect(found.alpn == ["http/1.1", "h2", "acme-tls/1"])
        #expect(found.sni == "example.com")
    }

    @Test func aHelloWithoutALPNSaysNone() throws {
        let hello = TLSHello.parse(try Self.clientHello(alpn: []), expecting: 1)
        guard case let .found(found) = hello else {
            Issue.record("not parsed: \(hello)")
            return
        }
        #expect(found.alpn == nil)
    }
}
