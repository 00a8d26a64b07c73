import NIOCore
import NIOSSL

/// Joins two channels byte for byte, as swift-nio-examples' connect-proxy
/// does: reads are held while the partner cannot take more (backpressure),
/// and a half-close travels across. With an idle limit, a pair that reads
/// nothing either way for that long closes both sides.
final class GlueHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private let onBytes: (@Sendable (Int) -> Void)?
    /// When this side last read; the first of the pair keeps the idle clock.
    private var lastRead = NIODeadline.uptimeNanoseconds(0)
    private var idle: IdleLimit?
    private var idleCheck: Scheduled<Void>?

    struct IdleLimit {
        var after: TimeAmount
        var closed: () -> Void
    }

    private init(onBytes: (@Sendable (Int) -> Void)?, idle: IdleLimit?) {
        self.onBytes = onBytes
        self.idle = idle
    }

    /// `onBytesFromFirst`/`onBytesFromSecond` count what each side sends;
    /// `idle` closes both once neither has sent for its time (then calls it).
    static func matchedPair(
        onBytesFromFirst: (@Sendable (Int) -> Void)? = nil,
        onBytesFromSecond: (@Sendable (Int) -> Void)? = nil, idle: IdleLimit? = nil
    ) -> (GlueHandler, GlueHandler) {
        let first = GlueHandler(onBytes: onBytesFromFirst, idle: idle)
        let second = GlueHandler(onBytes: onBytesFromSecond, idle: nil)
        first.partner = second
        second.partner = first
        return (first, second)
    }

    /// Checks at the moment the pair would have been idle for the limit:
    /// one timer per tunnel, not one per read.
    private func scheduleIdleCheck(context: ChannelHandlerContext, at deadline: NIODeadline) {
        guard let idle else { return }
        idleCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            guard let context = self.context else { return }
            let last = max(lastRead, partner?.lastRead ?? lastRead)
            if context.eventLoop.now - last >= idle.after {
                self.idle = nil
                idle.closed()
                partner?.context?.close(promise: nil)
                context.close(promise: nil)
            } else {
                scheduleIdleCheck(context: context, at: last + idle.after)
            }
        }
    }

    private func partnerWrite(_ buffer: ByteBuffer) {
        context?.write(Self.wrapOutboundOut(buffer), promise: nil)
    }

    private func partnerFlush() {
        context?.flush()
    }

    /// The partner will send no more: pass its FIN on once what is queued
    /// has gone (closing the output of a channel whose input is already
    /// shut closes it whole, and a whole close drops queued writes).
    private func partnerWriteEOF() {
        afterQueuedWrites { channel in channel.close(mode: .output, promise: nil) }
    }

    /// The partner is gone: deliver what is queued, then close; a peer that
    /// never reads gets `lingerLimit`, not forever.
    private func partnerCloseFull() {
        afterQueuedWrites { channel in channel.close(promise: nil) }
        guard let context else { return }
        let channel = context.channel
        let limit = context.eventLoop.scheduleTask(in: Self.lingerLimit) { channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in limit.cancel() }
    }

    static let lingerLimit = TimeAmount.seconds(30)

    private func afterQueuedWrites(_ body: @escaping @Sendable (Channel) -> Void) {
        guard let context else { return }
        let channel = context.channel
        // An empty write completes once every write before it has.
        context.writeAndFlush(Self.wrapOutboundOut(context.channel.allocator.buffer(capacity: 0))).whenComplete { _ in body(channel) }
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
        lastRead = context.eventLoop.now
        if let idle { scheduleIdleCheck(context: context, at: lastRead + idle.after) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
        idleCheck?.cancel()
        idleCheck = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = context.eventLoop.now
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
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A TLS peer that hung up without close_notify: the EOF that follows says the rest.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls { return }
        partner?.context?.close(promise: nil)
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
