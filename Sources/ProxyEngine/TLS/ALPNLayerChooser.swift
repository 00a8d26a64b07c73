import NIOCore
import NIOTLS

/// Behind the client-facing TLS handler of an intercepted connection that
/// offered `h2`: once the handshake says what the client chose, asks the
/// layers' owner for the HTTP/2 or the HTTP/1 layer after itself, and
/// leaves. Nothing but the handshake comes before that event.
final class ALPNLayerChooser: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let install: (_ protocol: String?, _ after: ALPNLayerChooser) throws -> Void
    private var chosen = false

    init(install: @escaping (_ protocol: String?, _ after: ALPNLayerChooser) throws -> Void) {
        self.install = install
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if !chosen, case let TLSUserEvent.handshakeCompleted(negotiated) = event {
            chosen = true
            do {
                try install(negotiated, self)
            } catch {
                context.fireErrorCaught(error)
                context.close(promise: nil)
                return
            }
            context.fireUserInboundEventTriggered(event)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
