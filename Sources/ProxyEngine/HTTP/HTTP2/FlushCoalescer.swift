import NIOCore

/// On an HTTP/2 connection, a client's or an origin's, just above the bytes
/// (TLS): the flushes of one event loop tick go out as one. Each stream
/// flushes its own frames, and most of them are flushed from another
/// connection's read (a response read from the origin, a request from the
/// client), where NIO's HTTP/2 handler cannot wait for a read's end: without
/// this, every stream cost a TLS flush and a `write` of its own. The flush
/// runs once the loop has handled this tick's I/O, so the frames of all the
/// streams answered meanwhile share one. Nothing is held past the tick, and
/// a close flushes first (a close fails what was never flushed).
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private enum State {
        /// Nothing waits: the next flush schedules one.
        case idle
        /// A flush is scheduled for the end of this tick.
        case scheduled
        /// Out of the pipeline: flushes pass at once.
        case removed
    }

    private var state = State.idle

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
        flushNow(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        flushNow(context: context)
        state = .removed
    }

    private func flushNow(context: ChannelHandlerContext) {
        guard case .scheduled = state else { return }
        state = .idle
        context.flush()
    }
}
