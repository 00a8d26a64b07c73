import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOEmbedded
import NIOSSL
import Testing

@testable import ProxyEngine

/// The router for redirected (transparent) and SOCKS5 connections on
/// `EmbeddedChannel`s: the first bytes decide the layer, and every dial
/// goes to the original destination. The CONNECT entry is in
/// `ConnectRoutingTests`.
@Suite struct ConnectionRouterTests {
    typealias Connector = ProxyPipelineTests.EmbeddedConnector

    /// A SOCKS5 connection's target, dialled already (its peer is an `EmbeddedChannel`).
    struct SOCKSEntry {
        var pinned: String?
        var rule: String?
    }

    struct Harness {
        let client = EmbeddedChannel()
        let connector: Connector
        let sink = ProxyPipelineTests.RecordingSink()
        let names = DNSNames()
        /// SOCKS5's peer, open before the router came.
        let socksPeer: EmbeddedChannel?

        init(
            original: ProxyTarget = ProxyTarget(host: "10.0.0.9", port: 80), sslProxying: [String] = [], authority: Bool = false,
            timeouts: AppSettings.Timeouts = .init(), socks: SOCKSEntry? = nil
        ) throws {
            connector = Connector(loop: client.embeddedEventLoop)
            let interception = Interception()
            var settings = AppSettings()
            settings.sslInclude = sslProxying
            interception.apply(settings)
            if authority { try TestAuthority.install(in: interception) }
            var services = ProxyServices(
                stats: TrafficStats(), interception: interception, rules: RuleEngine(),
                breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
                capture: sink, timeouts: timeouts, logger: Logger(label: "test"), connector: connector)
            services.peer = CapturePeer(device: "10.0.0.2", frontEnd: socks == nil ? "transparent" : "socks5")
            services.dnsNames = names
            try client.connect(to: SocketAddress(ipAddress: "10.0.0.2", port: 40000)).wait()
            let owner = ProxyPipeline(channel: client, services: services)
            if let socks {
                let peer = EmbeddedChannel(loop: client.embeddedEventLoop)
                try peer.connect(to: SocketAddress(ipAddress: "10.0.0.9", port: original.port)).wait()
                socksPeer = peer
                let tunnel = UpstreamDial.Tunnel(early: nil)
                try client.pipeline.syncOperations.addHandler(
                    ConnectionRouter(
                        owner: owner, entry: .socks(original, pinned: socks.pinned, peer: peer, tunnel: tunnel, rule: socks.rule)))
            } else {
                socksPeer = nil
                try client.pipeline.syncOperations.addHandler(ConnectionRouter(owner: owner, entry: .redirected(original)))
            }
        }

        /// Everything the proxy wrote to the client so far.
        func clientReceived() throws -> [UInt8] {
            var out: [UInt8] = []
            while let buffer = try client.readOutbound(as: ByteBuffer.self) { out += buffer.readableBytesView }
            return out
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

    // MARK: timing, half-close, backpressure

    @Test func aClientThatSaysNothingIsPassedThroughOnceTheRequestHeadTimeoutHasGone() throws {
        var timeouts = AppSettings.Timeouts()
        timeouts.requestHead = 2
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 25), timeouts: timeouts)
        h.client.embeddedEventLoop.advanceTime(by: .milliseconds(1900))
        #expect(h.connector.dials.isEmpty)
        h.client.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(h.connector.dials == ["10.0.0.9:25"] && h.connector.overrides == ["10.0.0.9"])
        // A server that speaks first reaches the client.
        try h.connector.upstreams[0].writeInbound(ByteBuffer(string: "220 mail.example ESMTP\r\n"))
        #expect(try h.clientReceived() == Array("220 mail.example ESMTP\r\n".utf8))
    }

    @Test func aHalfCloseBeforeAnyByteIsPassedThroughAtOnceAndReachesTheServer() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443))
        h.connector.answerAtOnce = false
        h.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(h.connector.dials == ["10.0.0.9:443"])
        let recorder = CloseRecorder()
        h.connector.pending.first.map { try? $0.0.pipeline.syncOperations.addHandler(recorder, position: .first) }
        h.connector.completePending()
        #expect(recorder.modes == [.output])
        #expect(h.client.isActive)
    }

    @Test func nothingIsReadWhileTheDialIsUnderWayAndBytesKeepTheirOrder() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443))
        h.connector.answerAtOnce = false
        let reads = CloseRecorder()
        try h.client.pipeline.syncOperations.addHandler(reads, position: .first)
        try h.send(ByteBuffer(bytes: [0x00, 0x01]))
        #expect(h.connector.dials == ["10.0.0.9:443"])
        try h.send(ByteBuffer(bytes: [0x02]))
        h.client.read()
        #expect(reads.reads == 0, "a read asked for while dialling is withheld")
        h.connector.completePending()
        #expect(reads.reads == 1, "and asked for once glued")
        #expect(try h.upstreamReceived() == ByteBuffer(bytes: [0x00, 0x01, 0x02]))
    }

    // MARK: layers

    @Test func h2cOnARedirectedConnectionIsReadAsHTTP2() throws {
        let h = try Harness()
        try h.send(
            ByteBuffer(
                bytes: H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.request("/x"))
            ))
        #expect(h.connector.dials == ["example.com:80"] && h.connector.overrides == ["10.0.0.9"])
        // The client chose HTTP/2 with prior knowledge: so does the proxy towards the origin.
        var upstream = try h.upstreamReceived()
        #expect(upstream.readString(length: upstream.readableBytes)?.hasPrefix("PRI * HTTP/2.0\r\n") == true)
        let frames = H2Wire.frames(try h.clientReceived()).frames
        #expect(frames.first?.is(.settings) == true, "the proxy answers in HTTP/2")
    }

    @Test func tlsOnTheListIsInterceptedUnderTheNameItsHelloAsksFor() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443), sslProxying: ["intercepted.example"], authority: true)
        try h.send(try Self.clientHello(sni: "intercepted.example"))
        #expect(h.connector.dials.isEmpty, "interception dials per request, after the handshake")
        #expect((try? h.client.pipeline.syncOperations.handler(type: MITMHandler.self)) != nil)
        #expect(try h.clientReceived().first == 0x16, "the client gets a TLS handshake back")
    }

    @Test func aHelloWithoutANameIsNamedByWhatDNSSaid() throws {
        let h = try Harness(original: ProxyTarget(host: "10.0.0.9", port: 443))
        h.names.learn(address: "10.0.0.9", name: "learned.example", ttl: 300, client: "10.0.0.2")
        try h.send(try Self.clientHello(sni: nil))
        #expect(h.connector.dials == ["learned.example:443"] && h.connector.overrides == ["10.0.0.9"])
    }

    // MARK: SOCKS5

    @Test func aSOCKSTunnelIsGluedToItsOpenConnectionAndItsRowNamesTheRule() throws {
        let h = try Harness(original: ProxyTarget(host: "db.example", port: 5432), socks: SOCKSEntry(pinned: nil, rule: "to-staging"))
        let peer = try #require(h.socksPeer)
        try h.send(ByteBuffer(bytes: [0x00, 0x00, 0x00, 0x08]))
        #expect(h.connector.dials.isEmpty, "the SOCKS5 connection is used")
        var bytes = ByteBuffer()
        while var part = try peer.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&part) }
        #expect(bytes == ByteBuffer(bytes: [0x00, 0x00, 0x00, 0x08]))
        _ = try? peer.close().wait()
        _ = try? h.client.close().wait()
        h.client.embeddedEventLoop.run()
        let row = try #require(h.sink.rows.first)
        #expect(row.rule == "to-staging" && row.frontEnd == "socks5" && row.url == "db.example:5432", "\(row)")
    }

    @Test func aSOCKSClientSpeakingHTTPLetsItsConnectionGoAndIsDialledPerRequest() throws {
        let h = try Harness(socks: SOCKSEntry(pinned: "10.0.0.9", rule: nil))
        let peer = try #require(h.socksPeer)
        try h.send(ByteBuffer(string: "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        #expect(!peer.isActive)
        #expect(h.connector.dials == ["example.com:80"] && h.connector.overrides == ["10.0.0.9"])
    }

    /// A real ClientHello, as NIOSSL's client writes it.
    static func clientHello(sni: String?) throws -> ByteBuffer {
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
