import NIOCore
import NIOHTTP2

/// Behind NIO's HTTP/2 client on a pooled origin connection: once the
/// origin sends GOAWAY (nginx does after `keepalive_requests`), the pool
/// stops handing the connection out; its open streams finish.
final class OriginGoawayWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame

    private var onGoaway: (() -> Void)?

    init(onGoaway: @escaping () -> Void) { self.onGoaway = onGoaway }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .goAway = Self.unwrapInboundIn(data).payload, let onGoaway {
            self.onGoaway = nil
            onGoaway()
        }
        context.fireChannelRead(data)
    }
}
