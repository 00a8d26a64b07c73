import NIOCore
import NIOHTTP2

/// Behind NIO's HTTP/2 client on a pooled origin connection: once the
/// origin sends GOAWAY (nginx does after `keepalive_requests`), `onGoaway`
/// gets its last stream id. The pool then stops handing the connection
/// out, moves the streams the origin will not process to a new one, and
/// closes this one once the streams it kept are done.
final class OriginGoawayWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame

    private var onGoaway: ((HTTP2StreamID) -> Void)?

    init(onGoaway: @escaping (HTTP2StreamID) -> Void) { self.onGoaway = onGoaway }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case let .goAway(lastStreamID, _, _) = Self.unwrapInboundIn(data).payload, let onGoaway {
            self.onGoaway = nil
            onGoaway(lastStreamID)
        }
        context.fireChannelRead(data)
    }
}
