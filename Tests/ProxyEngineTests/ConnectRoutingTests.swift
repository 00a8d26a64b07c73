import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import ProxyEngine

/// The router's CONNECT entry, through the explicit proxy's own HTTP layer
/// on `EmbeddedChannel`s: a host on the SSL-proxying list is answered at
/// once and its first bytes choose the layer; the rest is dialled first
/// (`ProxyPipelineTests` has the pass-through's holding, 502 and half-close).
@Suite struct ConnectRoutingTests {
    typealias Connector = ProxyPipelineTests.EmbeddedConnector

    struct Harness {
        let client = EmbeddedChannel()
        let connector: Connector
        let sink = ProxyPipelineTests.RecordingSink()

        init(timeouts: AppSettings.Timeouts = .init(), rules: String? = nil) throws {
            connector = Connector(loop: client.embeddedEventLoop)
            let interception = Interception()
            var settings = AppSettings()
            settings.sslInclude = ["intercepted.example"]
            interception.apply(settings)
            try TestAuthority.install(in: interception)
            let engine = RuleEngine()
            if let rules { engine.apply(try AppSettings.decode("{\"rules\": [\(rules)]}").settings) }
            let services = ProxyServices(
                stats: TrafficStats(), interception: interception, rules: engine,
                breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
                capture: sink, timeouts: timeouts, logger: Logger(label: "test"), connector: connector)
            try ProxyPipeline.startExplicitProxy(client, services: services)
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        }

        func send(_ bytes: [UInt8]) throws {
            try client.writeInbound(ByteBuffer(bytes: bytes))
            client.embeddedEventLoop.run()
        }

        func send(_ text: String) throws { try send(Array(text.utf8)) }

        func clientReceived() throws -> [UInt8] {
            var out: [UInt8] = []
            while let buffer = try client.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
            return out
        }

        func upstreamReceived() throws -> String {
            guard let upstream = connector.upstreams.first else { return "" }
            return try ProxyPipelineTests.Harness.drain(upstream)
        }
    }

    static let established = "HTTP/1.1 200 Connection Established\r\n"

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test func plaintextHTTPInsideAnInterceptedConnectGoesToTheConnectsTarget() throws {
        let h = try Harness()
        try h.send("CONNECT intercepted.example:8080 HTTP/1.1\r\nHost: intercepted.example:8080\r\n\r\n")
        #expect(Self.text(try h.clientReceived()).hasPrefix(Self.established), "answered before any byte of the tunnel")
        #expect(h.connector.dials.isEmpty)
        try h.send("GET /a HTTP/1.1\r\nHost: intercepted.example:8080\r\n\r\n")
        #expect(h.connector.dials == ["intercepted.example:8080"])
        #expect(try h.upstreamReceived().hasPrefix("GET /a HTTP/1.1\r\n"))
    }

    @Test func aClientHelloInTheSameReadAsTheConnectGoesToTLS() throws {
        let h = try Harness()
        let hello = try ConnectionRouterTests.clientHello(sni: "intercepted.example")
        try h.send(
            Array("CONNECT intercepted.example:443 HTTP/1.1\r\nHost: intercepted.example:443\r\n\r\n".utf8) + Array(hello.readableBytesView)
        )
        let answer = try h.clientReceived()
        let head = Array(Self.established.utf8)
        #expect(Array(answer.prefix(head.count)) == head)
        // After the 200's blank line, the leaf's handshake.
        let blank = Array("\r\n\r\n".utf8)
        let end = (0...(answer.count - blank.count)).first { Array(answer[$0..<$0 + blank.count]) == blank }
        #expect(end.map { answer.count > $0 + 4 && answer[$0 + 4] == 0x16 } == true, "a TLS handshake follows the 200")
        #expect((try? h.client.pipeline.syncOperations.handler(type: MITMHandler.self)) != nil)
        #expect(h.connector.dials.isEmpty)
    }

    @Test func h2cInsideAnInterceptedConnectIsHTTP2ToTheConnectsTarget() throws {
        let h = try Harness()
        try h.send("CONNECT intercepted.example:80 HTTP/1.1\r\nHost: intercepted.example:80\r\n\r\n")
        _ = try h.clientReceived()
        try h.send(
            H2Wire.opening
                + H2Wire.frame(
                    .headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1,
                    H2Wire.request("/g", authority: "intercepted.example")))
        #expect(h.connector.dials == ["intercepted.example:80"])
        // The client chose HTTP/2 with prior knowledge: so does the proxy towards the origin.
        #expect(try h.upstreamReceived().hasPrefix("PRI * HTTP/2.0\r\n"))
        #expect(H2Wire.frames(try h.clientReceived()).frames.first?.is(.settings) == true)
    }

    @Test func anInterceptedConnectWhoseClientSaysNothingEndsAsAHandshakeTimeout() throws {
        var timeouts = AppSettings.Timeouts()
        timeouts.tlsHandshake = 2
        let h = try Harness(timeouts: timeouts)
        try h.send("CONNECT intercepted.example:443 HTTP/1.1\r\nHost: intercepted.example:443\r\n\r\n")
        #expect(Self.text(try h.clientReceived()).hasPrefix(Self.established))
        // A half-close does not end it sooner: it is left to the handshake clock.
        h.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        h.client.embeddedEventLoop.advanceTime(by: .milliseconds(1900))
        #expect(h.client.isActive && h.sink.rows.isEmpty)
        h.client.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(!h.client.isActive)
        let row = try #require(h.sink.rows.first)
        #expect(row.error?.contains("timeouts.tls_handshake_seconds") == true, "\(row.error ?? "no error")")
        #expect(h.connector.dials.isEmpty)
    }

    @Test func aPassedThroughConnectFollowsItsHostOverrideAndItsRowNamesTheRule() throws {
        let h = try Harness(rules: #"{"name": "spoof", "match": "*.test/*", "action": "host_override", "address": "127.0.0.9"}"#)
        h.connector.answerAtOnce = false
        try h.send("CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\nhello")
        #expect(h.connector.dials == ["api.test:443"] && h.connector.overrides == ["127.0.0.9"])
        h.connector.completePending()
        #expect(Self.text(try h.clientReceived()).hasPrefix(Self.established))
        #expect(try h.upstreamReceived() == "hello")
        _ = try? h.connector.upstreams[0].close().wait()
        _ = try? h.client.close().wait()
        h.client.embeddedEventLoop.run()
        let row = try #require(h.sink.rows.first)
        #expect(row.rule == "spoof" && row.status == 200 && row.method == "CONNECT", "\(row)")
    }
}
