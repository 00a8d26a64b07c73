import BusymateShared
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import ProxyEngine

/// The HTTP/1 connection layer on a channel whose clock the test moves:
/// what the exchange handler after it is handed, and what the client gets.
@Suite struct HTTP1ServerConnectionTests {
    /// Stands where the exchange handler is: records what it is handed.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        var events: [String] = []
        /// What was handed up, without the read-completes.
        var seen: [String] { events.filter { $0 != "readComplete" } }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch Self.unwrapInboundIn(data) {
            case let .head(head): events.append("head \(head.uri)")
            case .body: events.append("body")
            case .end: events.append("end")
            }
        }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is ChannelShouldQuiesceEvent { events.append("quiesce") }
            if case .inputClosed = event as? ChannelEvent { events.append("inputClosed") }
        }
        func channelReadComplete(context: ChannelHandlerContext) { events.append("readComplete") }
        func errorCaught(context: ChannelHandlerContext, error: Error) { events.append("error \(error)") }
    }

    /// Stands where the socket is: counts the reads that reach it.
    final class ReadCounter: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    private func make(drainWait: Double = 1, reads: ReadCounter = ReadCounter()) throws -> (EmbeddedChannel, Recorder) {
        var timeouts = AppSettings.Timeouts()
        timeouts.drainIdleWait = drainWait
        timeouts.requestHead = 5
        let services = ProxyServices(
            stats: TrafficStats(), interception: Interception(), rules: RuleEngine(),
            breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
            capture: ProxyPipelineTests.RecordingSink(), logger: Logger(label: "test"))
        let recorder = Recorder()
        let channel = EmbeddedChannel()
        let connection = HTTP1ServerConnection(timeouts: timeouts, hooks: ExchangeHooks(services: services), logger: Logger(label: "test"))
        try channel.pipeline.syncOperations.addHandlers([reads, connection, recorder])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, recorder)
    }

    private func head(_ uri: String) -> HTTPServerRequestPart { .head(HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)) }

    private func respond(_ channel: EmbeddedChannel) throws -> HTTPResponseHead? {
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        guard case let .head(sent) = try channel.readOutbound(as: HTTPServerResponsePart.self) else { return nil }
        _ = try channel.readOutbound(as: HTTPServerResponsePart.self)
        return sent
    }

    @Test func aPipelinedRequestReachesTheExchangeOnlyOnceTheOneBeforeIsAnswered() throws {
        let (channel, recorder) = try make()
        try channel.writeInbound(head("/1"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(head("/2"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        #expect(recorder.seen == ["head /1", "end"])
        _ = try respond(channel)
        #expect(recorder.seen == ["head /1", "end", "head /2", "end"])
        // Handed up as a read from the socket would be: the exchange flushes upstream at its end.
        #expect(recorder.events.last == "readComplete")
    }

    @Test func theSocketIsNotReadWhileARequestWaitsAndIsReadAgainOnceItIsAnswered() throws {
        let reads = ReadCounter()
        let (channel, _) = try make(reads: reads)
        let before = reads.reads
        channel.read()
        #expect(reads.reads == before + 1, "nothing is under way: the read goes through")
        try channel.writeInbound(head("/1"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.read()
        #expect(reads.reads == before + 1, "a request is being answered: the socket is not read")
        try channel.writeInbound(head("/2"))
        channel.read()
        #expect(reads.reads == before + 1, "a request waits: the socket is not read")
        _ = try respond(channel)
        #expect(reads.reads == before + 2, "the waiting request is handed up and its body may follow: the held read goes")
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        _ = try respond(channel)
        #expect(reads.reads == before + 2, "no read was asked for since: none is made")
    }

    /// Bytes NIO's decoder refused behind an exchange under way, then more
    /// bytes read in the same read loop (the decoder, in its error state,
    /// says only that it got data): the exchange is answered, then the refusal.
    @Test func bytesReadAfterARefusalBehindAnExchangeDoNotEndIt() throws {
        let (channel, recorder) = try make()
        try channel.writeInbound(head("/1"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidMethod)
        channel.pipeline.fireErrorCaught(
            ByteToMessageDecoderError.dataReceivedInErrorState(HTTPParserError.invalidMethod, ByteBuffer(string: "more")))
        #expect(recorder.seen == ["head /1", "end"], "nothing but the request reached the exchange")
        #expect(channel.isActive)
        #expect(try respond(channel)?.status == .ok)
        guard case let .head(refusal) = try channel.readOutbound(as: HTTPServerResponsePart.self) else {
            Issue.record("the refused bytes were not answered")
            return
        }
        #expect(refusal.status == .badRequest)
    }

    /// A WebSocket refused by the origin: the client is told the connection
    /// closes, and it does once the answer is written.
    @Test func aDeclinedUpgradeIsAnsweredSayingCloseAndTheConnectionCloses() throws {
        let (channel, _) = try make()
        try channel.writeInbound(
            HTTPServerRequestPart.head(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/chat", headers: ["Upgrade": "websocket", "Connection": "Upgrade"])))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        let sent = try respond(channel)
        #expect(sent?.headers["Connection"] == ["close"])
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func aFreshConnectionGetsToSendOneRequestWhileDrainingToldItIsTheLast() throws {
        let (channel, recorder) = try make()
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
        try channel.writeInbound(head("/last"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        // The quiesce is this layer's: the exchange is not told.
        #expect(recorder.seen == ["head /last", "end"])
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(channel.isActive, "a request under way is not cut by the drain wait")
        let sent = try respond(channel)
        #expect(sent?.headers["Connection"] == ["close"])
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func aSilentConnectionIsClosedAfterTheDrainWait() throws {
        let (channel, _) = try make()
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
    }

    @Test func aHeadThatNeverCompletesIsAnswered408AndClosed() throws {
        let (channel, _) = try make()
        let connection = try channel.pipeline.syncOperations.handler(type: HTTP1ServerConnection.self)
        channel.embeddedEventLoop.advanceTime(by: .seconds(3))
        connection.bytesArrived()
        channel.embeddedEventLoop.advanceTime(by: .seconds(4))
        #expect(channel.isActive, "the head's clock starts at its first byte")
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        guard case let .head(sent) = try channel.readOutbound(as: HTTPServerResponsePart.self) else {
            Issue.record("no answer")
            return
        }
        #expect(sent.status == .requestTimeout)
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }

    @Test func aHalfClosedClientIsAnsweredThenClosed() throws {
        let (channel, recorder) = try make()
        try channel.writeInbound(head("/1"))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(recorder.seen == ["head /1", "end", "inputClosed"])
        #expect(channel.isActive)
        let sent = try respond(channel)
        #expect(sent?.headers["Connection"] == ["close"])
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
    }
}
