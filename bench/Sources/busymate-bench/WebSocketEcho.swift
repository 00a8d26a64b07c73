import NIOCore
import NIOWebSocket

/// The origin's side of a socket: each data frame goes back as it came
/// (unmasked, as a server sends), a ping gets its pong, a close is
/// answered and ends the connection. One flush per read burst, as a
/// server that batches its writes would.
final class WebSocketEcho: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var closing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation:
            guard !closing else { return }
            context.write(
                Self.wrapOutboundOut(WebSocketFrame(fin: frame.fin, opcode: frame.opcode, data: frame.unmaskedData)), promise: nil)
        case .ping:
            context.write(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            guard !closing else { return context.close(promise: nil) }
            closing = true
            let written = context.writeAndFlush(
                Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
            written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }
}
