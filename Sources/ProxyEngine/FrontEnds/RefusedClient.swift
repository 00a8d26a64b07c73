import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

/// A client outside `access.allow`: closed as soon as it is registered,
/// before a byte is read (closing inside the initializer would fail the
/// registration and log an accept error).
final class RefusedClient: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    func channelActive(context: ChannelHandlerContext) { context.close(promise: nil) }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
}
