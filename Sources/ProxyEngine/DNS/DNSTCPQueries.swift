import NIOCore

/// Queries over TCP, one length-prefixed message each. At most
/// `maxOutstanding` are forwarded at a time and nothing more is read while
/// the client does not read its answers (backpressure); a client that
/// half-closes gets its answers, then the connection closes.
final class DNSTCPQueries: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    static let maxOutstanding = 16
    private let forwarder: DNSForwarder
    private var outstanding = 0
    private var readPending = false
    private var inputClosed = false
    private var context: ChannelHandlerContext?
    init(forwarder: DNSForwarder) { self.forwarder = forwarder }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        outstanding += 1
        let loop = context.eventLoop
        let bound = NIOLoopBound(self, eventLoop: loop)
        forwarder.forward(unwrapInboundIn(data), from: context.channel.remoteAddress, transport: "tcp", on: loop) { answer in
            loop.execute { bound.value.answered(answer) }
        }
    }

    private func answered(_ answer: ByteBuffer) {
        guard let context else { return }
        // The write completes on this loop: the handler stays confined to it.
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(answer)).whenComplete { _ in
            let handler = bound.value
            handler.outstanding -= 1
            if handler.inputClosed, handler.outstanding == 0 { handler.context?.close(promise: nil) }
            handler.readIfHeld()
        }
    }

    func read(context: ChannelHandlerContext) {
        if outstanding >= Self.maxOutstanding || !context.channel.isWritable {
            readPending = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        readIfHeld()
        context.fireChannelWritabilityChanged()
    }

    private func readIfHeld() {
        guard readPending, let context, outstanding < Self.maxOutstanding, context.channel.isWritable else { return }
        readPending = false
        context.read()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
            return
        }
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            if outstanding == 0 { context.close(promise: nil) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// The first datagram from `server` on a query's own socket.
