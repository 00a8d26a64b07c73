import NIOCore
import NIOHTTP1

/// An HTTP/1 connection's end of its exchange: the exchange handler's own
/// place in the connection's pipeline.
final class ContextClient: ExchangeClient {
    private let context: ChannelHandlerContext
    private unowned let owner: ProxyPipeline

    init(_ context: ChannelHandlerContext, owner: ProxyPipeline) {
        self.context = context
        self.owner = owner
    }

    var eventLoop: EventLoop { context.eventLoop }
    var allocator: ByteBufferAllocator { context.channel.allocator }
    var remoteAddress: SocketAddress? { context.channel.remoteAddress }
    var isWritable: Bool { context.channel.isWritable }

    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        context.write(NIOAny(part), promise: promise)
    }

    func flush() { context.flush() }
    func read() { context.read() }
    func close() { context.close(promise: nil) }
    func hangUp() { context.close(promise: nil) }
    func closeFinished() { owner.closeFinishedClient() }
}
