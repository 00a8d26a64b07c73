import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import ProxyEngine

#if canImport(Glibc)
    import Glibc
#endif

/// A client connection's pipeline as the tunnel builds it, on
/// `EmbeddedChannel`s, with the network replaced by `EmbeddedConnector`:
/// bytes in from the client, bytes out to the "upstream", and back.
@Suite struct ProxyPipelineTests {
    /// Upstream connections are `EmbeddedChannel`s on the client's loop. A
    /// dial completes when the test says (`complete`), or at once.
    final class EmbeddedConnector: UpstreamConnector, @unchecked Sendable {
        let loop: EmbeddedEventLoop
        var upstreams: [EmbeddedChannel] = []
        var dials: [String] = []
        /// The address each dial was pinned to (a host_override, a transparent original destination).
        var overrides: [String?] = []
        var pending: [(EmbeddedChannel, EventLoopPromise<Channel>)] = []
        var answerAtOnce = true
        var refuse = false

        init(loop: EmbeddedEventLoop) { self.loop = loop }

        func connect(
            _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
            initialize: @escaping @Sendable (Channel) throws -> Void
        ) -> EventLoopFuture<Channel> {
            dials.append(dial.target.description)
            overrides.append(override)
            if refuse { return loop.makeFailedFuture(IOError(errnoCode: ECONNREFUSED, reason: "connect")) }
            let channel = EmbeddedChannel(loop: loop)
            do {
                try initialize(channel)
            } catch {
                return loop.makeFailedFuture(error)
            }
            upstreams.append(channel)
            let promise = loop.makePromise(of: Channel.self)
            if answerAtOnce {
                complete(channel, promise)
            } else {
                pending.append((channel, promise))
            }
            return promise.futureResult
        }

        func complete(_ channel: EmbeddedChannel, _ promise: EventLoopPromise<Channel>) {
            channel.connect(to: try! SocketAddress(ipAddress: "127.0.0.1", port: 80), promise: nil)
            promise.succeed(channel)
        }

        func completePending() {
            let waiting = pending
            pending = []
            for (channel, promise) in waiting { complete(channel, promise) }
            loop.run()
        }

        func failPending() {
            let waiting = pending
            pending = []
            for (_, promise) in waiting { promise.fail(IOError(errnoCode: ECONNREFUSED, reason: "connect")) }
            loop.run()
        }
    }

    /// Rows as the capture hook hands them over (no store, no body files).
    final class RecordingSink: CaptureSink, @unchecked Sendable {
        var rows: [ExchangeRecord] = []
        let bodyMax = 1 << 20
        let isBehind = false
        func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter? { nil }
        func submit(_ record: ExchangeRecord, files: [BodyFileWriter]) { rows.append(record) }
        func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void) { body() }
    }

    /// Breakpoints that hold requests whose URL contains `pattern`, until the test resolves them.
    final class ManualBreakpoints: BreakpointHolds, @unchecked Sendable {
        let pattern: String
        var held: [(url: String, message: RawHTTPMessage, promise: EventLoopPromise<BreakpointResolution>)] = []
        var left: [String] = []
        init(holding pattern: String) { self.pattern = pattern }
        var isEmpty: Bool { pattern.isEmpty }
        var usesFilters: Bool { false }
        func holds(_ kind: BreakpointEvent.Kind, _ url: String, exchange: FilterSubject?) -> Bool {
            kind == .request && url.contains(pattern)
        }
        func pause(
            _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, requestID: String, method: String, url: String,
            on eventLoop: EventLoop
        ) -> EventLoopFuture<BreakpointResolution> {
            let promise = eventLoop.makePromise(of: BreakpointResolution.self)
            held.append((url, message, promise))
            return promise.futureResult
        }
        func clientLeft(requestID: String) { left.append(requestID) }
    }

    struct Harness {
        let client: EmbeddedChannel
        let connector: EmbeddedConnector
        let sink = RecordingSink()

        /// `hooks`: the connection's hook list, made from its services (nil: the usual one).
        init(
            answerAtOnce: Bool = true, refuse: Bool = false, breakpoints: (any BreakpointHolds)? = nil, rules: String? = nil,
            hooks: ((ProxyServices) -> HookList)? = nil
        ) throws {
            client = EmbeddedChannel()
            connector = EmbeddedConnector(loop: client.embeddedEventLoop)
            connector.answerAtOnce = answerAtOnce
            connector.refuse = refuse
            let engine = RuleEngine()
            if let rules { engine.apply(try AppSettings.decode("{\"rules\": [\(rules)]}").settings) }
            var services = ProxyServices(
                stats: TrafficStats(), interception: Interception(), rules: engine,
                breakpoints: breakpoints ?? BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
                capture: sink, logger: Logger(label: "test"), connector: connector)
            services.hooks = hooks?(services)
            try ProxyPipeline.startExplicitProxy(client, services: services)
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        }

        /// The client's bytes, then whatever the loop was asked to do next
        /// (NIO's decoder leaves the pipeline on the next tick).
        func send(_ text: String) throws {
            try client.writeInbound(ByteBuffer(string: text))
            client.embeddedEventLoop.run()
        }

        /// Everything the proxy wrote to the client so far.
        func clientReceived() throws -> String { try Self.drain(client) }

        /// Everything the proxy wrote to upstream `index` so far.
        func upstreamReceived(_ index: Int = 0) throws -> String {
            guard connector.upstreams.indices.contains(index) else { return "" }
            return try Self.drain(connector.upstreams[index])
        }

        func upstreamSends(_ text: String, _ index: Int = 0) throws {
            try connector.upstreams[index].writeInbound(ByteBuffer(string: text))
        }

        static func drain(_ channel: EmbeddedChannel) throws -> String {
            var out = ""
            while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
                out += buffer.readString(length: buffer.readableBytes) ?? ""
            }
            return out
        }
    }

    // MARK: forwarding

    @Test func aRequestAndItsResponseAreForwarded() throws {
        let h = try Harness()
        try h.send("GET http://example.com/x?y=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\n\r\n")
        #expect(h.connector.dials == ["example.com:80"])
        let upstream = try h.upstreamReceived()
        #expect(upstream.hasPrefix("GET /x?y=1 HTTP/1.1\r\n"), "\(upstream)")
        // The URL's authority is the Host; hop-by-hop headers stay behind; Via names the proxy.
        #expect(
            upstream.contains("Host: example.com\r\n") && !upstream.contains("evil.example") && !upstream.contains("Proxy-Connection"),
            "\(upstream)")
        #expect(upstream.contains("Via: 1.1 busymate-"), "\(upstream)")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\n\r\nhi")
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix("\r\n\r\nhi"), "\(answer)")
        #expect(!answer.contains("Keep-Alive"), "\(answer)")
        // The next request to the same host reuses the upstream connection.
        try h.send("GET http://example.com/again HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(h.connector.dials.count == 1)
        #expect(try h.upstreamReceived().hasPrefix("GET /again HTTP/1.1\r\n"))
    }

    /// An origin that declines a WebSocket upgrade: NIO's request decoder
    /// parses nothing after an upgrade request, so the answer says the
    /// connection closes, and it does; before, the client's next request
    /// on it hung until its head clock ran out.
    @Test func aDeclinedUpgradeEndsTheClientsConnectionWithItsAnswer() throws {
        let h = try Harness()
        try h.send(
            "GET http://example.com/chat HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        #expect(try h.upstreamReceived().hasPrefix("GET /chat HTTP/1.1\r\n"))
        try h.upstreamSends("HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        h.client.embeddedEventLoop.run()
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(answer)")
        #expect(answer.lowercased().contains("connection: close\r\n"), "\(answer)")
        #expect(!h.client.isActive, "the connection stays open with a decoder that parses nothing")
        #expect(h.sink.rows.map(\.status) == [403])
    }

    /// A kept-alive connection is reused only for the same address: a
    /// request a host_override rule sends elsewhere is dialled there, not
    /// written on the connection to where the name resolves.
    @Test func aRequestMovedByHostOverrideDoesNotRideTheConnectionToTheName() throws {
        let h = try Harness(rules: #"{"name": "moved", "match": "example.com/moved*", "action": "host_override", "address": "127.0.0.9"}"#)
        try h.send("GET http://example.com/first HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(try h.upstreamReceived(0).hasPrefix("GET /first HTTP/1.1\r\n"))
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        #expect(try h.clientReceived().hasSuffix("hi"))
        try h.send("GET http://example.com/moved HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(
            h.connector.dials == ["example.com:80", "example.com:80"] && h.connector.overrides == [nil, "127.0.0.9"],
            "dials \(h.connector.dials), to \(h.connector.overrides)")
        #expect(try h.upstreamReceived(0).isEmpty, "nothing more went to the connection to the name")
        #expect(try h.upstreamReceived(1).hasPrefix("GET /moved HTTP/1.1\r\n"))
    }

    @Test func aBodyIsStreamedBothWaysAndACloseDelimitedAnswerIsRechunked() throws {
        let h = try Harness()
        try h.send("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\nContent-Length: 6\r\n\r\nabc")
        #expect(try h.upstreamReceived().hasSuffix("\r\n\r\nabc"))
        try h.send("def")
        #expect(try h.upstreamReceived() == "def")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npart one,")
        let head = try h.clientReceived()
        #expect(head.contains("transfer-encoding: chunked\r\n") || head.contains("Transfer-Encoding: chunked\r\n"), "\(head)")
        #expect(head.hasSuffix("9\r\npart one,\r\n"), "\(head)")
        try h.upstreamSends(" two")
        try h.connector.upstreams[0].close().wait()
        #expect(try h.clientReceived() == "4\r\n two\r\n0\r\n\r\n")
        #expect(h.client.isActive)
    }

    @Test func pipelinedRequestsWaitTheirTurnAndAnswersKeepTheirOrder() throws {
        let h = try Harness()
        try h.send(
            "GET http://example.com/1 HTTP/1.1\r\nHost: example.com\r\n\r\nGET http://example.com/2 HTTP/1.1\r\nHost: example.com\r\n\r\n")
        // The second request is held (NIO's pipeline handler) until the first is answered.
        #expect(try h.upstreamReceived().components(separatedBy: "GET /").count == 2)
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none")
        #expect(try h.clientReceived().hasSuffix("one"))
        #expect(try h.upstreamReceived().hasPrefix("GET /2 HTTP/1.1\r\n"))
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo")
        #expect(try h.clientReceived().hasSuffix("two"))
    }

    @Test func aRequestPipelinedBehindAHeldOneWaitsUntilTheHoldIsReleased() throws {
        let breakpoints = ManualBreakpoints(holding: "/held")
        // Each request has rules of its own: the released one keeps its own, the next gets its own.
        let h = try Harness(
            breakpoints: breakpoints,
            rules: """
                {"name": "held", "match": "example.com/held", "action": "headers", "request": {"add": {"X-Held": "1"}}, "response": {"add": {"X-Was-Held": "1"}}},
                {"name": "next", "match": "example.com/next", "action": "headers", "request": {"add": {"X-Next": "1"}}, "response": {"add": {"X-Was-Next": "1"}}}
                """)
        try h.send(
            "POST http://example.com/held HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\n\r\nbody"
                + "GET http://example.com/next HTTP/1.1\r\nHost: example.com\r\n\r\n")
        // Held whole, then paused: nothing goes upstream, not even the request behind it.
        #expect(breakpoints.held.map(\.url) == ["http://example.com/held"])
        #expect(breakpoints.held.first?.message.body == Array("body".utf8))
        #expect(h.connector.dials.isEmpty)
        #expect(try h.upstreamReceived().isEmpty && h.clientReceived().isEmpty)
        // Released as held: it goes on, and the next one only after its answer.
        if let hold = breakpoints.held.first { hold.promise.succeed(.forward(hold.message, edited: false)) }
        h.client.embeddedEventLoop.run()
        let first = try h.upstreamReceived()
        #expect(first.hasPrefix("POST /held HTTP/1.1\r\n") && first.hasSuffix("\r\n\r\nbody") && !first.contains("/next"), "\(first)")
        #expect(first.contains("X-Held: 1\r\n") && !first.contains("X-Next"), "\(first)")
        try h.upstreamSends("HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\nmade")
        let firstAnswer = try h.clientReceived()
        #expect(
            firstAnswer.hasPrefix("HTTP/1.1 201 Created\r\n") && firstAnswer.contains("X-Was-Held: 1\r\n")
                && !firstAnswer.contains("X-Was-Next"), "\(firstAnswer)")
        let second = try h.upstreamReceived()
        #expect(second.hasPrefix("GET /next HTTP/1.1\r\n") && second.contains("X-Next: 1\r\n") && !second.contains("X-Held"), "\(second)")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext")
        let secondAnswer = try h.clientReceived()
        #expect(
            secondAnswer.hasSuffix("next") && secondAnswer.contains("X-Was-Next: 1\r\n") && !secondAnswer.contains("X-Was-Held"),
            "\(secondAnswer)")
        #expect(h.sink.rows.map(\.url) == ["http://example.com/held", "http://example.com/next"])
        #expect(h.sink.rows.map(\.status) == [201, 200])
    }

    @Test func aClientThatLeavesWhileItsRequestIsHeldIsReportedToTheBreakpoints() throws {
        let breakpoints = ManualBreakpoints(holding: "/held")
        let h = try Harness(breakpoints: breakpoints)
        try h.send("GET http://example.com/held HTTP/1.1\r\nHost: example.com\r\n\r\n")
        #expect(breakpoints.held.count == 1)
        try h.client.close().wait()
        h.client.embeddedEventLoop.run()
        #expect(breakpoints.left.count == 1)
        #expect(h.connector.dials.isEmpty)
        #expect(h.sink.rows.count == 1 && h.sink.rows.first?.error != nil)
    }

    @Test func anUpstreamThatCannotBeReachedGetsA502AndTheConnectionStays() throws {
        let h = try Harness(answerAtOnce: false)
        try h.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        h.connector.failPending()
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"), "\(answer)")
        #expect(answer.contains("cannot connect to example.com:80"), "\(answer)")
        #expect(h.client.isActive)
    }

    @Test func anUpstreamSilentPastItsDeadlineGetsA504AndEachRequestGetsItsOwnDeadline() throws {
        let h = try Harness()
        let loop = h.client.embeddedEventLoop
        try h.send("GET http://example.com/1 HTTP/1.1\r\nHost: example.com\r\n\r\n")
        // Answered just in time: the deadline (120 s by default) restarts with the next request.
        loop.advanceTime(by: .seconds(119))
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(try h.clientReceived().hasSuffix("ok"))
        try h.send("GET http://example.com/2 HTTP/1.1\r\nHost: example.com\r\n\r\n")
        loop.advanceTime(by: .seconds(119))
        #expect(try h.clientReceived().isEmpty)
        loop.advanceTime(by: .seconds(1))
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n") && answer.contains("upstream_response_seconds"), "\(answer)")
        #expect(h.sink.rows.last?.error?.contains("sent no response within 120 s") == true)
    }

    @Test func anUpstreamThatResetsMidResponseClosesTheClient() throws {
        let h = try Harness()
        try h.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..")
        _ = try h.clientReceived()
        h.connector.upstreams[0].pipeline.fireErrorCaught(IOError(errnoCode: ECONNRESET, reason: "read"))
        h.client.embeddedEventLoop.run()
        #expect(!h.client.isActive)
    }

    @Test func aClientThatShutsItsWriteSideIsAnsweredThenClosed() throws {
        let h = try Harness()
        try h.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
        h.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(h.client.isActive)
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        let answer = try h.clientReceived()
        #expect(answer.contains("Connection: close\r\n") || answer.contains("connection: close\r\n"), "\(answer)")
        #expect(answer.hasSuffix("ok"))
        #expect(!h.client.isActive)
    }

    @Test func pipelinedRequestsFromAClientThatShutItsWriteSideAreAllAnsweredTheLastSayingClose() throws {
        let h = try Harness()
        try h.send(
            "GET http://example.com/1 HTTP/1.1\r\nHost: example.com\r\n\r\nGET http://example.com/2 HTTP/1.1\r\nHost: example.com\r\n\r\n")
        h.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(try h.upstreamReceived().hasPrefix("GET /1 HTTP/1.1\r\n"))
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none")
        let first = try h.clientReceived()
        #expect(first.hasSuffix("one"), "\(first)")
        #expect(h.client.isActive)
        let sent = try h.upstreamReceived()
        #expect(sent.hasPrefix("GET /2 HTTP/1.1\r\n"), "\(sent) \(h.connector.upstreams.count)")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo")
        let second = try h.clientReceived()
        #expect(second.hasPrefix("HTTP/1.1 200 OK\r\n") && second.hasSuffix("two"), "\(second)")
        #expect(second.contains("Connection: close\r\n") || second.contains("connection: close\r\n"), "\(second)")
        #expect(!h.client.isActive)
    }

    // MARK: CONNECT

    @Test func aConnectWithoutAPortIsRefused() throws {
        let h = try Harness()
        try h.send("CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n")
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && answer.contains("host:port"), "\(answer)")
        #expect(!h.client.isActive)
        #expect(h.connector.dials.isEmpty)
    }

    @Test func aConnectHoldsTheClientsBytesUntilGluedThenPassesThemOn() throws {
        let h = try Harness(answerAtOnce: false)
        // The CONNECT and the first bytes of the tunnel in one read, more while it dials.
        try h.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nfirst ")
        try h.send("second")
        #expect(h.connector.dials == ["example.com:443"])
        #expect(try h.clientReceived().isEmpty)
        h.connector.completePending()
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 200 Connection Established\r\n"), "\(answer)")
        #expect(try h.upstreamReceived() == "first second")
        // Glued: bytes go both ways unparsed, HTTP or not.
        try h.send("GET nonsense\r\n\r\n")
        #expect(try h.upstreamReceived() == "GET nonsense\r\n\r\n")
        try h.upstreamSends("from the server")
        #expect(try h.clientReceived() == "from the server")
        #expect(throws: Never.self) { try h.client.pipeline.syncOperations.handler(type: GlueHandler.self) }
        #expect((try? h.client.pipeline.syncOperations.handler(type: HTTPExchangeHandler.self)) == nil)
    }

    @Test func aConnectThatCannotBeDialledGetsA502AndAClose() throws {
        let h = try Harness(refuse: true)
        try h.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        let answer = try h.clientReceived()
        #expect(answer.hasPrefix("HTTP/1.1 502 Bad Gateway\r\n"), "\(answer)")
        #expect(!h.client.isActive)
    }

    @Test func aHalfCloseDuringTheDialReachesTheServerOnceGlued() throws {
        let h = try Harness(answerAtOnce: false)
        try h.send("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nlast words")
        h.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(h.client.isActive)
        let recorder = CloseRecorder()
        h.connector.pending.first.map { try? $0.0.pipeline.syncOperations.addHandler(recorder, position: .first) }
        h.connector.completePending()
        #expect(try h.upstreamReceived() == "last words")
        #expect(recorder.modes == [.output])
    }
}

/// Records the closes that pass it (an `EmbeddedChannel` cannot half-close itself).
final class CloseRecorder: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny
    var modes: [CloseMode] = []
    var reads = 0
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        modes.append(mode)
        if mode == .all { context.close(mode: mode, promise: promise) } else { promise?.succeed(()) }
    }
    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}
