import BusymateShared
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix

/// Keeps what the server sent through a just-opened proxy tunnel before
/// anything reads it, and hands it on as it leaves.
final class EarlyBytes: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private var held: [NIOAny] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { held.append(data) }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        let bytes = held
        held = []
        for data in bytes { context.fireChannelRead(data) }
        if !bytes.isEmpty { context.fireChannelReadComplete() }
        context.leavePipeline(removalToken: removalToken)
    }
}
