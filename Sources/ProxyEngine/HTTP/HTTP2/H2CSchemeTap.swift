import NIOCore
import NIOHPACK
import NIOHTTP2

/// On a stream of an h2c client of the explicit proxy, before NIO's codec
/// (which drops `:scheme`): tells the exchange the scheme the request
/// named, so an `https` one is refused as an absolute-form `https://` URL
/// is over HTTP/1 (it must come through CONNECT), never fetched in plain text.
final class H2CSchemeTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias InboundOut = HTTP2Frame.FramePayload

    private weak var exchange: HTTPExchangeHandler?

    init(exchange: HTTPExchangeHandler) { self.exchange = exchange }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case let .headers(headers) = Self.unwrapInboundIn(data), let scheme = headers.headers.first(name: ":scheme") {
            exchange?.requestScheme = scheme.lowercased()
        }
        context.fireChannelRead(data)
    }
}
