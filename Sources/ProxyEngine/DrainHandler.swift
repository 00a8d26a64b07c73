import Logging
import NIOCore
import NIOHTTP1

/// When the tunnel drains, NIO's pipeline handler closes every idle
/// connection at once, including one accepted a moment ago whose first
/// request is still on its way; its client would see an empty reply. This
/// holds the quiesce signal back until that first request arrives (it is
/// then answered with `Connection: close`), or closes the connection after
/// a second of silence.
final class DrainHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart

    private enum State { case fresh, quiescePending, seenRequest }
    private var state = State.fresh
    static let firstRequestWait: TimeAmount = .seconds(1)
    private static let logger = Logger(label: "busymate.proxy")

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let pending = state == .quiescePending
        if case .head = Self.unwrapInboundIn(data) { state = .seenRequest }
        context.fireChannelRead(data)
        if pending && state == .seenRequest {
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, state == .fresh else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        state = .quiescePending
        let channel = context.channel
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: Self.firstRequestWait) {
            if bound.value.state == .quiescePending {
                Self.logger.notice("closing a connection that sent no request after the drain began", metadata: ["PEER": "\(channel.remoteAddress.map { "\($0)" } ?? "?")"])
                channel.close(promise: nil)
            }
        }
    }
}
