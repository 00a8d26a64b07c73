import NIOCore
import NIOHTTP1
import NIOTLS

/// The upstream channel's last handler: hands what the server says to its
/// side (`UpstreamSide`, which reports it to the exchange) and holds
/// upstream reads while the client cannot take more.
final class UpstreamHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var side: UpstreamSide?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var methods: [HTTPMethod] = []
    private var responseKeepAlive = true
    private var failure: Error?

    init(side: UpstreamSide) { self.side = side }

    /// For a connection dialled before any exchange (eager ALPN): the exchange that adopts it attaches.
    init() {}

    func detach() { side = nil }

    /// To the next exchange's side that takes this connection over (a parked one).
    func attach(_ side: UpstreamSide) {
        self.side = side
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
        side?.received(part, lastOnConnection: !responseKeepAlive, from: self)
    }

    func channelReadComplete(context: ChannelHandlerContext) { side?.readComplete(from: self) }

    func channelInactive(context: ChannelHandlerContext) { side?.closed(self, error: failure) }

    func serverHello(_ hello: TLSHello) { side?.serverHello(hello, from: self) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { side?.handshakeDone(self) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failure = error
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { side?.serverWritable(self) }
    }

    func read(context: ChannelHandlerContext) {
        if side?.clientIsWritable ?? true {
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
