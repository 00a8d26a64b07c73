import NIOCore

/// Joins two channels byte for byte, as swift-nio-examples' connect-proxy
/// does: reads are held while the partner cannot take more (backpressure),
/// and a half-close travels across.
final class GlueHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private let onBytes: (@Sendable (Int) -> Void)?

    private init(onBytes: (@Sendable (Int) -> Void)?) {
        self.onBytes = onBytes
    }

    /// `onBytesFromFirst`/`onBytesFromSecond` count what each side sends.
    static func matchedPair(onBytesFromFirst: (@Sendable (Int) -> Void)? = nil,
                            onBytesFromSecond: (@Sendable (Int) -> Void)? = nil) -> (GlueHandler, GlueHandler) {
        let first = GlueHandler(onBytes: onBytesFromFirst)
        let second = GlueHandler(onBytes: onBytesFromSecond)
        first.partner = second
        second.partner = first
        return (first, second)
    }

    private func partnerWrite(_ buffer: ByteBuffer) {
        context?.write(Self.wrapOutboundOut(buffer), promise: nil)
    }

    private func partnerFlush() {
        context?.flush()
    }

    private func partnerWriteEOF() {
        context?.close(mode: .output, promise: nil)
    }

    private func partnerCloseFull() {
        context?.close(promise: nil)
    }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    private var partnerWritable: Bool {
        context?.channel.isWritable ?? false
    }
}

extension GlueHandler: ChannelDuplexHandler {
    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = Self.unwrapInboundIn(data)
        onBytes?(buffer.readableBytes)
        partner?.partnerWrite(buffer)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.partnerFlush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.partnerCloseFull()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, case .inputClosed = event {
            // The peer will send no more: pass the half-close on.
            partner?.partnerWriteEOF()
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        partner?.partnerCloseFull()
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            partner?.partnerBecameWritable()
        }
    }

    func read(context: ChannelHandlerContext) {
        if let partner, partner.partnerWritable {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
