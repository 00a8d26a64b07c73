import NIOCore
import NIOSSL
import NIOWebSocket

/// One side of a socket after its `101`: hands the frames NIO's decoder
/// reads to the session and writes the frames the session sends it. Reads
/// wait while the session says so (the other side cannot take more, or the
/// store is behind), as `GlueHandler`'s do.
final class WebSocketRelay {
    typealias InboundIn = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let fromClient: Bool
    private(set) var session: WebSocketSession?
    private(set) var context: ChannelHandlerContext?
    private var pendingRead = false

    init(fromClient: Bool, session: WebSocketSession) {
        self.fromClient = fromClient
        self.session = session
    }

    var isWritable: Bool { context?.channel.isWritable ?? false }

    func write(_ frame: WebSocketFrame, promise: EventLoopPromise<Void>?) {
        context?.write(Self.wrapOutboundOut(frame), promise: promise)
    }

    func flush() { context?.flush() }

    /// Reads go on if they waited.
    func resume() {
        guard pendingRead, let context, session?.mayRead(fromClient: fromClient) ?? true else { return }
        pendingRead = false
        context.read()
    }
}

extension WebSocketRelay: ChannelDuplexHandler {
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        session = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        session?.frame(Self.unwrapInboundIn(data), fromClient: fromClient)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        session?.readComplete(fromClient: fromClient)
    }

    func channelInactive(context: ChannelHandlerContext) {
        session?.sideClosed(fromClient: fromClient)
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            session?.inputClosed(fromClient: fromClient)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A TLS peer that hung up without close_notify: the EOF that follows says the rest.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls { return }
        session?.failed(error, fromClient: fromClient)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { session?.becameWritable(fromClient: fromClient) }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if session?.mayRead(fromClient: fromClient) ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
