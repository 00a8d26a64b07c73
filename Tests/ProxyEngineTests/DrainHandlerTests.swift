import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import ProxyEngine

@Suite struct DrainHandlerTests {
    /// Records, in order, what reaches the handler after DrainHandler.
    final class Recorder: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        var seen: [String] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if case .head = Self.unwrapInboundIn(data) { seen.append("head") }
        }
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if event is ChannelShouldQuiesceEvent { seen.append("quiesce") }
        }
    }

    private func make() throws -> (EmbeddedChannel, Recorder) {
        let recorder = Recorder()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([DrainHandler(), recorder])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, recorder)
    }

    private let head = HTTPServerRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "http://example.com/"))

    @Test func aFreshConnectionGetsToSendItsFirstRequest() throws {
        let (channel, recorder) = try make()
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(recorder.seen.isEmpty)
        try channel.writeInbound(head)
        #expect(recorder.seen == ["head", "quiesce"])
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(channel.isActive)
    }

    @Test func aSilentFreshConnectionIsClosedAfterASecond() throws {
        let (channel, _) = try make()
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
    }

    @Test func aConnectionThatHasServedARequestIsQuiescedAtOnce() throws {
        let (channel, recorder) = try make()
        try channel.writeInbound(head)
        channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        #expect(recorder.seen == ["head", "quiesce"])
    }
}
