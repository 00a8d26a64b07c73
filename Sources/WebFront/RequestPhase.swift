import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Tells `RequestClock` (below HTTP) when a request head has been read and
/// when its answer has been written.
final class RequestPhase: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Requests read and not yet answered (a client may pipeline them).
    private var open = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            open += 1
            if open == 1 { context.triggerUserOutboundEvent(RequestClock.Event.answering, promise: nil) }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let ended: Bool
        if case .end = unwrapOutboundIn(data) { ended = true } else { ended = false }
        context.write(data, promise: promise)
        guard ended && open > 0 else { return }
        open -= 1
        if open == 0 { context.triggerUserOutboundEvent(RequestClock.Event.answered, promise: nil) }
    }
}
