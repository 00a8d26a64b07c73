import NIOCore

/// On an HTTP/2 connection, a client's or an origin's, just above the bytes
/// (TLS): the flushes of one event loop tick go out as one, and the small
/// frames written meanwhile as one buffer. Each stream flushes its own
/// frames, and most of them are flushed from another connection's read (a
/// response read from the origin, a request from the client), where NIO's
/// HTTP/2 handler cannot wait for a read's end: without this, every stream
/// cost a TLS flush and a `write` of its own, and every frame a TLS record.
/// The flush runs once the loop has handled this tick's I/O, so the frames
/// of all the streams answered meanwhile share one. Nothing is held past
/// the tick, and a close flushes first (a close fails what was never
/// flushed). Large buffers (a body's DATA) pass as they are: copying them
/// would cost more than a record.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    /// Buffers up to this size are copied into the merged one.
    static let smallWrite = 4096
    /// The merged buffer is written on once it would pass this (a TLS record's most).
    static let mergedLimit = 16384

    private enum State {
        /// Nothing waits: the next flush schedules one.
        case idle
        /// A flush is scheduled for the end of this tick.
        case scheduled
        /// Out of the pipeline: writes and flushes pass at once.
        case removed
    }

    private var state = State.idle
    /// Small writes since the last that went down, and their promises.
    private var merged: ByteBuffer?
    private var promises: [EventLoopPromise<Void>] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .byteBuffer(let bytes) = unwrapOutboundIn(data), bytes.readableBytes <= Self.smallWrite, !isRemoved else {
            writeMerged(context: context)
            context.write(data, promise: promise)
            return
        }
        if let current = merged, current.readableBytes + bytes.readableBytes > Self.mergedLimit { writeMerged(context: context) }
        if merged == nil { merged = context.channel.allocator.buffer(capacity: max(Self.smallWrite, bytes.readableBytes)) }
        merged?.writeImmutableBuffer(bytes)
        if let promise { promises.append(promise) }
    }

    func flush(context: ChannelHandlerContext) {
        switch state {
        case .idle:
            state = .scheduled
            let loop = context.eventLoop.assumeIsolated()
            loop.execute { self.flushNow(context: context) }
        case .scheduled:
            break
        case .removed:
            context.flush()
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // What was written goes before the close, flushed or not yet (a half-close sends it).
        if case .scheduled = state { state = .idle }
        writeMerged(context: context)
        context.flush()
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        flushNow(context: context)
        writeMerged(context: context)
        state = .removed
    }

    private var isRemoved: Bool {
        if case .removed = state { return true }
        return false
    }

    private func flushNow(context: ChannelHandlerContext) {
        guard case .scheduled = state else { return }
        state = .idle
        writeMerged(context: context)
        context.flush()
    }

    /// The merged bytes go down as one write; its outcome is each merged write's.
    private func writeMerged(context: ChannelHandlerContext) {
        guard let bytes = merged else { return }
        merged = nil
        let waiting = promises
        promises = []
        let promise: EventLoopPromise<Void>?
        switch waiting.count {
        case 0: promise = nil
        case 1: promise = waiting.first
        default:
            let all = context.eventLoop.makePromise(of: Void.self)
            for each in waiting { all.futureResult.cascade(to: each) }
            promise = all
        }
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
    }
}
