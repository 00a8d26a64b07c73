import NIOCore
import NIOHTTP2

/// Our streams on one origin HTTP/2 connection, behind NIO's HTTP/2
/// handler at the frame level (no stream channels): each frame goes to its
/// stream by id, the connection's window is reopened here, and a GOAWAY
/// refuses the streams the origin will not process, so that their
/// exchanges send them again on a new connection. Connection-level frames
/// go on down the pipeline (the settings and GOAWAY watchers). Confined to
/// the connection's event loop.
final class OriginStreams: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private var context: ChannelHandlerContext?
    private var numbered: [HTTP2StreamID: OriginStream] = [:]
    /// Opened, their HEADERS not gone yet.
    private var waiting: [ObjectIdentifier: OriginStream] = [:]
    private var nextID = HTTP2StreamID(1)
    /// Streams NIO has opened on the wire (its StreamCreatedEvent) and not closed yet.
    private var open: Set<HTTP2StreamID> = []
    private var goawayLast: HTTP2StreamID?
    /// Streams that handed parts over in this read: told when it ends.
    private var touchedInRead: [OriginStream] = []
    private(set) var isReading = false
    private var flushAfterRead = false
    private var flushScheduled = false
    /// Streams whose head was flushed without the request's end: sent at the end of the tick.
    private var headsDue: [OriginStream] = []
    /// Called once when no stream of ours is left (a retired connection closes then).
    var onDrained: (() -> Void)?

    /// NIO's default: the connection window the streams share.
    static let connectionWindow = 65_535

    var isEmpty: Bool { numbered.isEmpty && waiting.isEmpty }

    func isOpen(_ id: HTTP2StreamID) -> Bool { open.contains(id) }
    var isWritable: Bool { context?.channel.isWritable ?? false }

    /// A new stream, or nil when the connection takes none (closed, or the origin sent GOAWAY).
    func open(secure: Bool, delegate: any OriginStreamDelegate) -> OriginStream? {
        guard let context, context.channel.isActive, goawayLast == nil else { return nil }
        let stream = OriginStream(connection: self, eventLoop: context.eventLoop, secure: secure, delegate: delegate)
        waiting[ObjectIdentifier(stream)] = stream
        return stream
    }

    /// The stream's HEADERS go now: its id, or nil when no new stream may start.
    func number(_ stream: OriginStream) -> HTTP2StreamID? {
        guard goawayLast == nil, context != nil, nextID < HTTP2StreamID.maxID, waiting.removeValue(forKey: ObjectIdentifier(stream)) != nil
        else { return nil }
        let id = nextID
        nextID = HTTP2StreamID(Int32(id) + 2)
        numbered[id] = stream
        return id
    }

    func write(_ frame: HTTP2Frame, promise: EventLoopPromise<Void>? = nil) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        context.write(wrapOutboundOut(frame), promise: promise)
    }

    /// Streams flush as they write: NIO's handler runs its buffers at
    /// each flush, so they become one, at the end of the read under way or
    /// of this tick.
    func flush() {
        if isReading {
            flushAfterRead = true
            return
        }
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            self.context?.flush()
        }
    }

    func sendHeadSoon(_ stream: OriginStream) {
        guard let context else { return }
        headsDue.append(stream)
        guard headsDue.count == 1 else { return }
        context.eventLoop.assumeIsolated().execute { [self] in
            let due = headsDue
            headsDue.removeAll(keepingCapacity: true)
            for stream in due { stream.sendHeldHead() }
            self.context?.flush()
        }
    }

    func remove(_ stream: OriginStream) {
        if let id = stream.id { numbered[id] = nil } else { waiting[ObjectIdentifier(stream)] = nil }
        if isEmpty, let drained = onDrained {
            onDrained = nil
            drained()
        }
    }

    func touched(_ stream: OriginStream) { touchedInRead.append(stream) }

    private var all: [OriginStream] { Array(numbered.values) + Array(waiting.values) }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        isReading = true
        let frame = unwrapInboundIn(data)
        guard frame.streamID == .rootStream else {
            // A stream closed here (the exchange gave up) may still have frames coming: they are dropped.
            numbered[frame.streamID]?.receive(frame.payload)
            return
        }
        context.fireChannelRead(data)
        if case let .goAway(last, _, _) = frame.payload {
            // After the pool has retired the connection: the refused streams
            // go to a new one. Those still held back behind the stream limit
            // are refused too, whatever their id: NIO opens no stream after a GOAWAY.
            goawayLast = min(goawayLast ?? last, last)
            for stream in all {
                guard let id = stream.id else {
                    stream.refused(heldBack: false)
                    continue
                }
                if !open.contains(id) {
                    stream.refused(heldBack: true)
                } else if id > last {
                    stream.refused(heldBack: false)
                }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        isReading = false
        let touched = touchedInRead
        touchedInRead.removeAll(keepingCapacity: true)
        for stream in touched { stream.readComplete() }
        if flushAfterRead {
            flushAfterRead = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            open.remove(closed.streamID)
            numbered[closed.streamID]?.closedOnWire(reason: closed.reason)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            guard let inbound = window.inboundWindowSize else { return }
            if window.streamID == .rootStream {
                reopenConnectionWindow(inbound)
            } else {
                numbered[window.streamID]?.inboundWindowChanged(inbound)
            }
        } else if let created = event as? NIOHTTP2StreamCreatedEvent {
            open.insert(created.streamID)
        } else if !(event is NIOHTTP2BulkStreamWindowChangeEvent) {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// DATA on any stream uses the connection's window too: it reopens once half is used.
    private func reopenConnectionWindow(_ window: Int) {
        let target = Self.connectionWindow
        guard window < target, target - window >= window else { return }
        write(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: target - window)))
        flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for stream in all { stream.connectionClosed() }
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            for stream in all { stream.connectionWritable() }
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // One stream's error is that stream's (NIO resets it); a stream already gone has nobody to tell.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            numbered[streamError.streamID]?.failed(streamError.baseError)
            return
        }
        context.fireErrorCaught(error)
    }
}
