import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Synchronization
import Testing

@testable import ProxyEngine

/// Hooks as mitmproxy's addons: one list per connection, each hook told
/// every step of an exchange with the exchange's flow.
@Suite struct ExchangeHookTests {
    /// An addon that writes down what it is told, and edits what it may.
    final class Listener: ExchangeHook, @unchecked Sendable {
        var heard: [String] = []
        var wantsBodies: Bool { true }
        func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) {
            heard.append("requestHead \(flow.url)")
            head.headers.add(name: "X-Addon", value: "1")
        }
        func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {
            heard.append("requestBody \(part.readableBytes)")
        }
        func upstreamConnected(to server: SocketAddress?, _ flow: inout ExchangeFlow) { heard.append("upstreamConnected") }
        func responseHead(_ head: inout HTTPResponseHead, _ flow: inout ExchangeFlow) {
            heard.append("responseHead \(head.status.code)")
            head.headers.add(name: "X-Addon-Saw", value: "\(flow.requestID != nil)")
        }
        func responseHeadSent(_ head: HTTPResponseHead, _ flow: inout ExchangeFlow) { heard.append("responseHeadSent") }
        func responseBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {
            heard.append("responseBody \(part.readableBytes)")
        }
        func ended(error: String?, _ flow: inout ExchangeFlow) {
            heard.append("ended")
            flow.notes.append("seen by an addon")
        }
    }

    /// Counts what reaches it and takes no bodies.
    final class HeadsOnly: ExchangeHook, @unchecked Sendable {
        var heads = 0
        var bodies = 0
        func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) { heads += 1 }
        func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) { bodies += 1 }
    }

    @Test func anAddedHookHearsEachStepOfAnExchangeInOrderAndItsEditsGoOn() throws {
        let listener = Listener()
        let heads = HeadsOnly()
        let h = try ProxyPipelineTests.Harness(hooks: { services in
            let base = HookList(services)
            // Before the capture (last): the row records what the addon sent on.
            return HookList(
                Array(base.all.dropLast()) + [listener, heads] + [base.all.last].compactMap { $0 }, stats: services.stats,
                capture: base.capture)
        })
        try h.send("POST http://example.com/up HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n\r\nabc")
        #expect(try h.upstreamReceived().contains("X-Addon: 1\r\n"), "the addon's request edit went upstream")
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        let answer = try h.clientReceived()
        #expect(answer.contains("X-Addon-Saw: true"), "the addon's response edit reached the client: \(answer)")
        // The body waits for the upstream connection, and is told as it goes on.
        #expect(
            listener.heard == [
                "requestHead http://example.com/up", "upstreamConnected", "requestBody 3", "responseHead 200",
                "responseHeadSent", "responseBody 2", "ended",
            ], "\(listener.heard)")
        // A hook that takes no bodies is not called for them.
        #expect(heads.heads == 1 && heads.bodies == 0)
        let row = try #require(h.sink.rows.first)
        #expect(row.requestHeaders.contains("X-Addon"), "the row shows the request as the addon left it")
        #expect(row.note == "seen by an addon", "\(row.note ?? "nil")")
    }

    /// The list is made with the connection and shared by what it carries:
    /// an HTTP/2 stream's exchange gets a copy of its connection's services
    /// (naming the stream), and with it the same list.
    @Test func theHookListIsMadeOncePerConnectionAndSharedByItsStreams() throws {
        let services = ProxyServices(
            stats: TrafficStats(), interception: Interception(), rules: RuleEngine(),
            breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
            capture: ProxyPipelineTests.RecordingSink(), logger: Logger(label: "test"))
        #expect(services.hooks == nil)
        let connection = ProxyPipeline(channel: EmbeddedChannel(), services: services)
        let list = try #require(connection.services.hooks)
        var streamServices = connection.services
        streamServices.peer.streamID = 3
        let stream = HTTPExchangeHandler(owner: connection, route: .absoluteForm, services: streamServices)
        #expect(stream.hooks.hookList === list)
        #expect(ExchangeHooks(services: streamServices).hookList === list)
        // Counters, rules, breakpoints, capture: presence joins when the connection has a device to touch.
        #expect(list.all.count == 4 && list.bodies.count == 2 && list.steering.count == 2)
    }
}

/// Held messages are records of the capture store: they go through the
/// capture sink (which writes off the event loops), not around it.
@Suite struct HeldMessageRecordTests {
    /// Called on NIO's thread pool as well as the test's thread: what it keeps is behind a lock.
    final class BreakpointSink: CaptureSink, Sendable {
        private let pausedEvents = Mutex<[BreakpointEvent]>([])
        private let outcomeList = Mutex<[(Int64, BreakpointEvent.Outcome)]>([])
        var paused: [BreakpointEvent] { pausedEvents.withLock { $0 } }
        var outcomes: [(Int64, BreakpointEvent.Outcome)] { outcomeList.withLock { $0 } }
        let bodyMax = 1 << 20
        let isBehind = false
        func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter? { nil }
        func submit(_ record: ExchangeRecord, files: [BodyFileWriter]) {}
        func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void) { body() }
        func recordBreakpointPause(_ event: BreakpointEvent, on eventLoop: EventLoop) -> EventLoopFuture<BreakpointEvent> {
            pausedEvents.withLock { $0.append(event) }
            var stored = event
            stored.id = 7
            return eventLoop.makeSucceededFuture(stored)
        }
        func recordBreakpointOutcome(id: Int64, _ outcome: BreakpointEvent.Outcome, final: Data?, on eventLoop: EventLoop)
            -> EventLoopFuture<Void>
        {
            outcomeList.withLock { $0.append((id, outcome)) }
            return eventLoop.makeSucceededVoidFuture()
        }
    }

    @Test func aHeldMessageAndItsOutcomeAreRecordedThroughTheCaptureSink() throws {
        let dir = URL(fileURLWithPath: "/tmp/bmh-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let sink = BreakpointSink()
        let breakpoints = BreakpointController(
            store: StoreHandle(try CaptureDatabase(paths: GroupPaths(root: dir))), records: sink, notifier: nil,
            groupPath: dir.path)
        breakpoints.apply(try AppSettings.decode(#"{"breakpoints": {"request": ["example.com/held"], "timeout_seconds": 0}}"#).settings)
        // A real loop: the outcome is recorded on NIO's thread pool, which
        // hands back to the loop; an EmbeddedEventLoop cannot be handed to.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let message = try RawHTTPMessage.parse(Array("GET /held HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8), as: .request)
        let resolution = breakpoints.pause(
            message, bodyless: false, kind: .request, requestID: "held-1", method: "GET",
            url: "http://example.com/held", on: loop)
        let dropped = Atomic<Int>(0)
        resolution.whenSuccess { resolved in
            if case .dropped = resolved { dropped.store(1, ordering: .relaxed) } else { dropped.store(2, ordering: .relaxed) }
        }
        let deadline = Date().addingTimeInterval(5)
        while breakpoints.heldCount == 0 && Date() < deadline { usleep(10_000) }
        // Registered on the loop once the sink gave the row its id.
        try loop.submit {}.wait()
        #expect(sink.paused.map(\.requestID) == ["held-1"] && breakpoints.heldCount == 1, "the held message went to the sink")
        #expect(dropped.load(ordering: .relaxed) == 0, "nothing resolved it yet")
        breakpoints.clientLeft(requestID: "held-1")
        while dropped.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(10_000) }
        #expect(sink.outcomes.map(\.0) == [7] && sink.outcomes.first?.1 == .clientClosed, "\(sink.outcomes)")
        let wasDropped = dropped.load(ordering: .relaxed) == 1
        #expect(wasDropped, "a held request whose client left goes nowhere")
    }
}
