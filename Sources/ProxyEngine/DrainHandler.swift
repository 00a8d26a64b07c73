import Logging
import NIOCore
import NIOHTTP1

/// When the tunnel drains, NIO's pipeline handler closes every idle
/// connection at once: one accepted a moment ago whose first request is on
/// its way, and a kept-alive one whose client is sending its next request
/// just then. Either client would see an empty reply or a reset. This holds
/// the quiesce signal back while the connection is idle, until a request
/// arrives (it is then answered with `Connection: close`) or a second of
/// silence has passed (then the connection is closed).
final class DrainHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// No request under way: just accepted, or between exchanges.
        case idle
        /// A request has arrived and its response has not ended.
        case busy
        /// Quiesce came while idle and is held back.
        case quiescePending
        /// Quiesce was passed on: NIO's handler takes it from here.
        case quiesced
    }

    private var state = State.idle
    /// Requests whose response has not ended (pipelining allows several).
    private var open = 0
    static let idleWait: TimeAmount = .seconds(1)
    private static let logger = Logger(label: "busymate.proxy")

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let pending = state == .quiescePending
        if case .head = Self.unwrapInboundIn(data) {
            open += 1
            if state == .idle || state == .quiescePending { state = .busy }
        }
        context.fireChannelRead(data)
        if pending && state == .busy {
            state = .quiesced
            context.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent())
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = Self.unwrapOutboundIn(data) {
            open = max(0, open - 1)
            if open == 0 && state == .busy { state = .idle }
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, state == .idle else {
            if event is ChannelShouldQuiesceEvent, state == .busy { state = .quiesced }
            context.fireUserInboundEventTriggered(event)
            return
        }
        state = .quiescePending
        let channel = context.channel
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: Self.idleWait) {
            if bound.value.state == .quiescePending {
                Self.logger.debug("closing a connection that sent no request after the drain began", metadata: ["PEER": "\(channel.remoteAddress.map { "\($0)" } ?? "?")"])
                channel.close(promise: nil)
            }
        }
    }
}
