import NIOCore
import NIOTLS

/// Behind an upstream TLS handler that offered `h2`: tells what the origin
/// chose once the handshake is done (nil: it chose nothing, HTTP/1.1), or
/// fails with the handshake. Then it leaves.
final class UpstreamALPNWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private var promise: EventLoopPromise<String?>?

    init(promise: EventLoopPromise<String?>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case let TLSUserEvent.handshakeCompleted(negotiated) = event, let promise {
            self.promise = nil
            // The layer for the chosen protocol goes in before the bytes that follow.
            promise.succeed(negotiated)
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        promise?.fail(error)
        promise = nil
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.eof)
        promise = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.ioOnClosedChannel)
        promise = nil
    }
}
