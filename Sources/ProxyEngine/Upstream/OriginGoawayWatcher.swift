import NIOCore
import NIOHTTP2

/// Behind NIO's HTTP/2 client on a pooled origin connection: each GOAWAY
/// the origin sends (nginx does after `keepalive_requests`; grpc-go and
/// Envoy send two on a graceful stop, the first naming the highest stream
/// id) gives `onGoaway` its last stream id. The pool then stops handing
/// the connection out, moves the streams the origin will not process to a
/// new one, and closes this one once the streams it kept are done.
final class OriginGoawayWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame

    private let onGoaway: (HTTP2StreamID) -> Void

    init(onGoaway: @escaping (HTTP2StreamID) -> Void) { self.onGoaway = onGoaway }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case let .goAway(lastStreamID, _, _) = Self.unwrapInboundIn(data).payload { onGoaway(lastStreamID) }
        context.fireChannelRead(data)
    }
}
