import NIOCore
import NIOHTTP2

/// An HTTP/2 client's streams, behind NIO's HTTP/2 handler at the frame
/// level (no stream channels): a client's HEADERS on a new stream id makes
/// the stream and its exchange, each frame goes to its stream by id, and
/// the connection's window is reopened here. The connection manager hears
/// of streams opening and closing (idle clock, drain). Connection-level
/// frames go on down the pipeline. Confined to the connection's event loop.
final class ClientStreams: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias InboundOut = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What a new stream's exchange is made with.
    struct Exchanges {
        let owner: ProxyPipeline
        let leg: HTTP2ClientLeg
        let route: ForwardRoute
        let pinnedAddress: String?
        let clientSNI: String?
        let services: ProxyServices
        /// h2c to the explicit proxy: each request's `:scheme` is read.
        let tapsScheme: Bool
    }

    private let exchanges: Exchanges
    private let manager: NIOHTTP2ServerConnectionManagementHandler.HTTP2StreamDelegate
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: ClientStream] = [:]
    /// Client stream ids only grow: a frame for a lower unknown one belongs to a stream that is gone.
    private var highestID = HTTP2StreamID.rootStream
    /// Streams that carry an exchange, from their opening to NIO's StreamClosedEvent: the
    /// connection manager hears of these (one NIO refused at its first frame never opened).
    private var opened: Set<HTTP2StreamID> = []
    private var touchedInRead: [ClientStream] = []
    private(set) var isReading = false
    private var flushAfterRead = false
    private var flushScheduled = false

    /// NIO's default: the connection window the streams share.
    static let connectionWindow = 65_535

    init(exchanges: Exchanges, manager: NIOHTTP2ServerConnectionManagementHandler.HTTP2StreamDelegate) {
        self.exchanges = exchanges
        self.manager = manager
    }

    var isWritable: Bool { context?.channel.isWritable ?? false }

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

    func remove(_ stream: ClientStream) { streams[stream.id] = nil }

    func touched(_ stream: ClientStream) { touchedInRead.append(stream) }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        isReading = true
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        guard id != .rootStream else {
            context.fireChannelRead(data)
            return
        }
        if let stream = streams[id] {
            stream.receive(frame.payload)
        } else if id > highestID, case .headers = frame.payload {
            highestID = id
            let stream = open(id, context: context)
            stream.receive(frame.payload)
        }
    }

    private func open(_ id: HTTP2StreamID, context: ChannelHandlerContext) -> ClientStream {
        var services = exchanges.services
        services.peer.streamID = Int(id)
        let exchange = HTTPExchangeHandler(owner: exchanges.owner, route: exchanges.route, services: services, leg: exchanges.leg)
        exchange.pinnedAddress = exchanges.pinnedAddress
        exchange.clientSNI = exchanges.clientSNI
        let stream = ClientStream(id: id, connection: self, channel: context.channel, exchange: exchange, tapsScheme: exchanges.tapsScheme)
        streams[id] = stream
        opened.insert(id)
        stream.start()
        return stream
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
            if opened.remove(closed.streamID) != nil { manager.streamClosed(closed.streamID, channel: context.channel) }
            streams[closed.streamID]?.closedOnWire(reason: closed.reason)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            guard let inbound = window.inboundWindowSize else { return }
            if window.streamID == .rootStream {
                reopenConnectionWindow(inbound)
            } else {
                streams[window.streamID]?.inboundWindowChanged(inbound)
            }
        } else if let created = event as? NIOHTTP2StreamCreatedEvent {
            if opened.contains(created.streamID) { manager.streamCreated(created.streamID, channel: context.channel) }
        } else if !(event is NIOHTTP2BulkStreamWindowChangeEvent) {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func reopenConnectionWindow(_ window: Int) {
        let target = Self.connectionWindow
        guard window < target, target - window >= window else { return }
        write(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: target - window)))
        flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        for stream in Array(streams.values) { stream.connectionClosed() }
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            for stream in Array(streams.values) { stream.connectionWritable() }
        }
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            streams[streamError.streamID]?.failed(streamError.baseError)
            return
        }
        context.fireErrorCaught(error)
    }
}
