import NIOCore
import NIOHTTP1
import NIOTLS

/// The upstream channel's last handler: hands response parts over and
/// holds upstream reads while the client cannot take more.
final class UpstreamHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var exchange: HTTPExchangeHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var methods: [HTTPMethod] = []
    private var responseKeepAlive = true
    private var failure: Error?

    init(exchange: HTTPExchangeHandler) { self.exchange = exchange }

    func detach() { exchange = nil }

    /// To the next exchange that takes this connection over (a parked one).
    func attach(_ exchange: HTTPExchangeHandler) {
        self.exchange = exchange
        clientBecameWritable()
    }

    /// No response under way, and the server keeps the connection open.
    var isReusable: Bool { methods.isEmpty && responseKeepAlive && failure == nil }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case let .head(head) = Self.unwrapOutboundIn(data) { methods.append(head.method) }
        context.write(data, promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = Self.unwrapInboundIn(data)
        switch part {
        case let .head(head): responseKeepAlive = head.isKeepAlive
        case .end: if !methods.isEmpty { methods.removeFirst() }
        case .body: break
        }
        let exchange = self.exchange
        // Let go of a connection the server is closing before the end goes
        // out: writing it may hand a pipelined request over at once.
        if case .end = part, !responseKeepAlive { exchange?.upstream.keepAliveEnded(self) }
        exchange?.upstreamResponse(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) { exchange?.context?.flush() }

    func channelInactive(context: ChannelHandlerContext) { exchange?.upstream.closed(self, error: failure) }

    func serverHello(_ hello: TLSHello) { exchange?.upstream.serverHello(hello, from: self) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { exchange?.upstream.handshakeDone(self) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failure = error
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { exchange?.resumeClientReads() }
    }

    func read(context: ChannelHandlerContext) {
        if exchange?.clientIsWritable ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }

    func clientBecameWritable() {
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }
}
