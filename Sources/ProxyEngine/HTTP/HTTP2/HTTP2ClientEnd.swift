import NIOCore
import NIOSSL

/// At the end of an HTTP/2 client connection's pipeline: HTTP/2 has no
/// half-close, so a client's FIN (or TLS's end without close_notify) ends
/// the connection, its streams and their origin streams at once; NIO's
/// HTTP/2 handler does not pass these on to the streams, whose exchange
/// handlers would otherwise never learn that the client left.
final class HTTP2ClientEnd: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private weak var owner: ProxyPipeline?

    init(owner: ProxyPipeline) { self.owner = owner }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            if let owner { owner.closeFinishedClient() } else { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // TLS without close_notify: the EOF that follows ends the connection, without waiting for a close_notify.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls {
            owner?.noteRaggedTLSEnd()
            return
        }
        context.fireErrorCaught(error)
    }
}
