import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOEmbedded
import NIOSSL
import Testing
@testable import ProxyEngine

/// The transparent front end on `EmbeddedChannel`s: the first bytes decide
/// the layer, and every dial goes to the original destination.
@Suite struct TransparentRouterTests {
    typealias Connector = ProxyPipelineTests.EmbeddedConnector

    struct Harness {
        let client = EmbeddedChannel()
        let connector: Connector
        let sink = ProxyPipelineTests.RecordingSink()
        let names = DNSNames()

        init(original: ProxyTarget = ProxyTarget(host: "10.0.0.9", port: 80), sslProxying: [String] = []) throws {
            connector = Connector(loop: client.embeddedEventLoop)
            let interception = Interception()
            var settings = AppSettings()
            settings.sslInclude = sslProxying
            interception.apply(settings)
            var services = ProxyServices(stats: TrafficStats(), interception: interception, rules: RuleEngine(),
                                         breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
                                         capture: sink, logger: Logger(label: "test"), connector: connector)
            services.peer = CapturePeer(device: "10.0.0.2", frontEnd: "transparent")
            services.dnsNames = names
            let owner = ProxyPipeline(channel: client, services: services)
            try client.pipeline.syncOperations.addHandler(TransparentRouter(owner: owner, original: original, pinned: original.host))
            try client.connect(to: SocketAddress(ipAddress: "10.0.0.2", port: 40000)).wait()
        }

        func send(_ bytes: ByteBuffer) throws {
            try client.writeInbound(bytes)
            client.embeddedEventLoop.run()
        }

        func upstreamReceived(_ index: Int = 0) throws -> ByteBuffer {
            var out = ByteBuffer()
            guard connector.upstreams.indices.contains(index) else { return out }
            while var buffer = try connector.upstreams[index].readOutbound(as: ByteBuffer.self) { out.writeBuffer(&buffer) }
            return out
        }
    }

    @Test func plainHTTPGoesToTheOriginalAddressWithItsHostNamed() throws {
        let h = try Harness()
        // Split inside the method: it waits for the space.
        try h.send(ByteBuffer(string: "GE"))
        #expect(h.connector.dials.isEmpty)
        try h.send(ByteBuffer(string: "T /page?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        #expect(h.connector.dials == ["example.com:80"])
        #expect(h.connector.overrides == ["10.0.0.9"])
        var upstream = try h.upstreamReceived()
        let text = upstream.readString(length: upstream.readableBytes) ?? ""
        #expect(text.hasPrefix("GET /page?q=1 HTTP/1.1\r\n") && text.contains("Host: example.com\r\n"), "\(text)")
        try h.connector.upstreams[0].writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        h.client.embeddedEventLoop.run()
        let row = try #require(h.sink.rows.first)
        #expect(row.url == "http://example.com/page?q=1" && row.status == 200)
        #expect(row.frontEnd == "transparent" && row.device == "10.0.0.2")
    }

    @Test func hostNamesTheHostButNotThePort() throws {
        let h = try Harness()
        try h.send(ByteBuffer(string: "GET /x HTTP/1.1\r\nHost: example.com:22\r\n\r\n"))
        #expect(h.connector.dials == ["example.com:80"] && h.connector.overrides == ["10.0.0.9"])
    }

    @Test func aRequestWithNoHostIsNamedByItsAddressOrWhatDNSSaid() throws {
        let h = try Harness()
        h.names.learn(address: "10.0.0.9", name: "learned.example", ttl: 300, client: "10.0.0.2")
        try h.send(ByteBuffer(string: "GET / HTTP/1.0\r\n\r\n"))
        #expect(h.connector.dials == ["learned.example:80"] && h.connector.overrides == ["10.0.0.9"])
    }

    @Test func tlsNotOnTheListIsPassedThroughToTheOriginalAddressUntouched() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443), sslProxying: ["intercepted.example"])
        let hello = try Self.clientHello(sni: "pinned.example")
        // Half the hello: not enough to decide.
        var first = hello
        let head = first.readSlice(length: hello.readableBytes / 2) ?? ByteBuffer()
        try h.send(head)
        #expect(h.connector.dials.isEmpty)
        try h.send(first)
        #expect(h.connector.dials == ["pinned.example:443"] && h.connector.overrides == ["10.0.0.9"])
        #expect(try h.upstreamReceived() == hello)
    }

    @Test func bytesThatAreNeitherTLSNorHTTPAreGluedAsTheyCame() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443))
        let bytes = ByteBuffer(bytes: [0x00, 0x01, 0x02, 0xff, 0x20])
        try h.send(bytes)
        #expect(h.connector.dials == ["10.0.0.9:443"] && h.connector.overrides == ["10.0.0.9"])
        #expect(try h.upstreamReceived() == bytes)
        // The glue closes the other side after one.
        _ = try? h.connector.upstreams[0].close().wait()
        _ = try? h.client.close().wait()
        h.client.embeddedEventLoop.run()
        let row = try #require(h.sink.rows.first)
        #expect(row.tlsMode == .passthrough && row.frontEnd == "transparent" && row.bytesUp == 5)
    }

    @Test func aLowerCaseWordIsNoHTTPMethod() throws {
        let h = try Harness()
        try h.send(ByteBuffer(string: "get / HTTP/1.1\r\n\r\n"))
        #expect(h.connector.dials == ["10.0.0.9:80"])
    }

    /// A real ClientHello, as NIOSSL's client writes it.
    static func clientHello(sni: String) throws -> ByteBuffer {
        let channel = EmbeddedChannel()
        let context = try NIOSSLContext(configuration: .makeClientConfiguration())
        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: context, serverHostname: sni))
        try channel.connect(to: SocketAddress(ipAddress: "10.0.0.9", port: 443)).wait()
        var out = ByteBuffer()
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { out.writeBuffer(&buffer) }
        _ = try? channel.finish()
        return out
    }
}
