import NIOCore
import NIOHTTP2

/// Behind NIO's HTTP/2 client on an origin connection: says when the
/// origin's first SETTINGS frame has come. Streams opened before it are
/// opened blind to the origin's MAX_CONCURRENT_STREAMS and may be refused;
/// after it, NIO holds back those beyond the limit until others end.
final class RemoteSettingsWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame

    private var promise: EventLoopPromise<Void>?
    private var timer: Scheduled<Void>?
    /// An origin that sends no SETTINGS within this is no HTTP/2 server.
    static let wait = TimeAmount.seconds(10)

    struct NoSettings: Error, CustomStringConvertible {
        var description: String {
            "the server chose HTTP/2 but sent no SETTINGS within \(RemoteSettingsWatcher.wait.nanoseconds / 1_000_000_000) s"
        }
    }

    init(promise: EventLoopPromise<Void>) { self.promise = promise }

    func handlerAdded(context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: Self.wait) { [self] in
            promise?.fail(NoSettings())
            promise = nil
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .settings(.settings) = Self.unwrapInboundIn(data).payload, let promise {
            self.promise = nil
            timer?.cancel()
            promise.succeed()
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise?.fail(ChannelError.eof)
        promise = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        promise?.fail(ChannelError.ioOnClosedChannel)
        promise = nil
    }
}
