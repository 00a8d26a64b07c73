import BusymateShared
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

/// Sits on the socket's side of the TLS handler of an intercepted
/// connection: a close from here skips TLS's own shutdown.
final class RawCloser: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func closeSocket() { context?.close(promise: nil) }
}
