import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// One stream of an HTTP/2 client, as frames, carrying its exchange: the
/// request's frames go to the exchange as HTTP/1-shaped parts while it
/// reads (else they wait here and the stream's window stays shut), and
/// its response goes out as HEADERS and DATA, a head held until the next
/// part or a flush so a bodyless answer is one HEADERS frame with
/// END_STREAM, as the origin sent it (gRPC's trailers-only replies need
/// that). Confined to the connection's event loop.
final class ClientStream: ExchangeClient {
    let id: HTTP2StreamID
    private weak var connection: ClientStreams?
    let exchange: HTTPExchangeHandler
    let eventLoop: EventLoop
    let allocator: ByteBufferAllocator
    let remoteAddress: SocketAddress?
    private var headSeen = false
    private var receivedEnd = false
    private var sentEnd = false
    private(set) var isClosed = false
    /// NIO closed it (both ends done, or reset): nothing is to be reset here.
    private var closedOnWire = false
    /// The exchange asked for more of the request (NIO's stream channel read).
    private var reading = false
    private var held = CircularBuffer<(part: HTTPServerRequestPart, bytes: Int)>()
    private var heldBytes = 0
    private var delivering = false
    /// Handed parts to the exchange in the connection's current read.
    var inRead = false
    private var inboundWindow: Int?
    private var pendingHead: (HPACKHeaders, EventLoopPromise<Void>?)?
    private var unsent = 0
    static let unsentLimit = 64 * 1024
    /// For h2c to the explicit proxy: the request's `:scheme` decides whether it may be fetched.
    private let tapsScheme: Bool

    init(id: HTTP2StreamID, connection: ClientStreams, channel: Channel, exchange: HTTPExchangeHandler, tapsScheme: Bool) {
        self.id = id
        self.connection = connection
        self.exchange = exchange
        eventLoop = channel.eventLoop
        allocator = channel.allocator
        remoteAddress = channel.remoteAddress
        self.tapsScheme = tapsScheme
    }

    var isWritable: Bool { !isClosed && unsent < Self.unsentLimit && (connection?.isWritable ?? false) }

    /// A new stream reads at once, as a stream channel does when it becomes active.
    func start() {
        exchange.client = self
        exchange.clientWantsRead(client: self)
    }

    // MARK: the request, from the connection

    func receive(_ payload: HTTP2Frame.FramePayload) {
        guard !isClosed else { return }
        switch payload {
        case let .headers(block):
            if headSeen {
                receivedEnd = true
                deliver(.end(HTTP2HeaderMapping.regular(block.headers)), bytes: 0)
                return
            }
            headSeen = true
            let head: HTTPRequestHead
            do {
                let scheme: String
                (head, scheme) = try HTTP2HeaderMapping.requestHead(block.headers, endStream: block.endStream)
                if tapsScheme { exchange.requestScheme = scheme.lowercased() }
            } catch {
                exchange.clientFailed(error, client: self)
                return
            }
            if block.endStream { receivedEnd = true }
            deliver(.head(head), bytes: 0)
            if block.endStream { deliver(.end(nil), bytes: 0) }
        case let .data(data):
            guard case let .byteBuffer(buffer) = data.data else { return }
            if data.endStream { receivedEnd = true }
            if buffer.readableBytes > 0 { deliver(.body(buffer), bytes: buffer.readableBytes) }
            if data.endStream { deliver(.end(nil), bytes: 0) }
        default:
            break
        }
    }

    private func deliver(_ part: HTTPServerRequestPart, bytes: Int) {
        guard !isClosed else { return }
        if reading, held.isEmpty, !delivering {
            hand(part)
        } else {
            held.append((part, bytes))
            heldBytes += bytes
        }
    }

    private func hand(_ part: HTTPServerRequestPart) {
        if !inRead, let connection, connection.isReading {
            inRead = true
            connection.touched(self)
        }
        delivering = true
        exchange.clientSent(part, client: self)
        delivering = false
    }

    /// The read has ended: the exchange flushes what it sent upstream, and is asked whether it reads on.
    func readComplete() {
        inRead = false
        guard !isClosed else { return }
        exchange.clientReadComplete()
        reading = false
        exchange.clientWantsRead(client: self)
    }

    // MARK: ExchangeClient

    func read() {
        guard !isClosed else { return }
        reading = true
        guard !delivering, !held.isEmpty else {
            reopenWindow()
            return
        }
        var handed = false
        while reading, !isClosed, !held.isEmpty {
            let (part, bytes) = held.removeFirst()
            heldBytes -= bytes
            handed = true
            hand(part)
        }
        guard !isClosed else { return }
        reopenWindow()
        if handed, !inRead { exchange.clientReadComplete() }
    }

    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?) {
        guard !isClosed, !sentEnd, let connection else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        switch part {
        case let .head(head):
            sendHeldHead()
            pendingHead = (HTTP2HeaderMapping.response(head), promise)
        case let .body(body):
            sendHeldHead()
            guard body.readableBytes > 0 else {
                promise?.succeed()
                return
            }
            let bytes = body.readableBytes
            unsent += bytes
            let written = eventLoop.makePromise(of: Void.self)
            connection.write(HTTP2Frame(streamID: id, payload: .data(.init(data: body))), promise: written)
            written.futureResult.assumeIsolated().whenComplete { [self] result in
                sent(bytes)
                promise?.completeWith(result)
            }
        case let .end(trailers?) where !trailers.isEmpty:
            sendHeldHead()
            sentEnd = true
            connection.write(
                HTTP2Frame(streamID: id, payload: .headers(.init(headers: HTTP2HeaderMapping.trailers(trailers), endStream: true))),
                promise: promise)
        case .end:
            sentEnd = true
            if let (block, headPromise) = pendingHead {
                pendingHead = nil
                if let headPromise, let promise { headPromise.futureResult.cascade(to: promise) }
                connection.write(
                    HTTP2Frame(streamID: id, payload: .headers(.init(headers: block, endStream: true))), promise: headPromise ?? promise)
            } else {
                connection.write(
                    HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(ByteBuffer()), endStream: true))), promise: promise)
            }
        }
    }

    private func sendHeldHead() {
        guard let (block, promise) = pendingHead, let connection else { return }
        pendingHead = nil
        connection.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: block))), promise: promise)
    }

    private func sent(_ bytes: Int) {
        let wasFull = unsent >= Self.unsentLimit
        unsent -= bytes
        if wasFull, unsent < Self.unsentLimit, !isClosed { exchange.clientBecameWritable() }
    }

    /// Flushes even once the stream has closed: writing its last frame
    /// closes it in NIO at once, before the flush that sends that frame.
    func flush() {
        if !isClosed { sendHeldHead() }
        connection?.flush()
    }

    /// The exchange gives up on the stream: reset, unless both ends are done.
    /// Finished here first: NIO closes the stream within the reset's write,
    /// and its StreamClosedEvent then finds nothing left to tell.
    func close() {
        guard !isClosed else { return }
        let reset = !(sentEnd && receivedEnd) && !closedOnWire
        let connection = connection
        finish(nil)
        if reset {
            connection?.write(HTTP2Frame(streamID: id, payload: .rstStream(.cancel)))
            connection?.flush()
        }
    }

    /// A drop rule: reset on the next tick (the connection manager hears of
    /// a stream only after the read that opened it).
    func hangUp() {
        eventLoop.assumeIsolated().execute { [self] in close() }
    }

    /// The answer is complete: RST_STREAM with NO_ERROR on the next tick if
    /// the request has not ended, so the client stops sending what nobody reads.
    func closeFinished() {
        eventLoop.assumeIsolated().execute { [self] in
            guard !isClosed, !receivedEnd, !closedOnWire, let connection else { return }
            finish(nil)
            connection.write(HTTP2Frame(streamID: id, payload: .rstStream(.noError)))
            connection.flush()
        }
    }

    // MARK: flow control and endings, from the connection

    func inboundWindowChanged(_ window: Int) {
        inboundWindow = window
        reopenWindow()
    }

    /// Reopens the window once at most half is left, counting what waits
    /// here as unread: a stream the exchange does not read stays shut.
    private func reopenWindow() {
        guard reading, !isClosed, !closedOnWire, !receivedEnd, let window = inboundWindow, let connection else { return }
        let open = window + heldBytes
        let target = HTTP2Limits.streamWindow
        guard open < target, target - open >= open else { return }
        inboundWindow = window + (target - open)
        connection.write(HTTP2Frame(streamID: id, payload: .windowUpdate(windowSizeIncrement: target - open)))
        connection.flush()
    }

    /// NIO closed the stream: both ends finished, or it was reset (`reason`).
    func closedOnWire(reason: HTTP2ErrorCode?) {
        guard !isClosed else { return }
        closedOnWire = true
        // What the client sent before it went still reaches the exchange.
        while !held.isEmpty, !isClosed {
            let (part, _) = held.removeFirst()
            hand(part)
        }
        guard !isClosed else { return }
        if let reason { exchange.clientFailed(NIOHTTP2Errors.streamClosed(streamID: id, errorCode: reason), client: self) }
        guard !isClosed else { return }
        finish(nil)
    }

    func connectionClosed() { closedOnWire(reason: nil) }

    func connectionWritable() {
        if !isClosed, unsent < Self.unsentLimit { exchange.clientBecameWritable() }
    }

    /// NIO refused a frame of this stream (its own RST_STREAM follows, or the stream is reset here on the next tick).
    func failed(_ error: Error) {
        guard !isClosed else { return }
        exchange.clientFailed(error, client: self)
    }

    private func finish(_ error: Error?) {
        isClosed = true
        held.removeAll()
        heldBytes = 0
        if let (_, promise) = pendingHead {
            pendingHead = nil
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
        connection?.remove(self)
        exchange.clientClosed(client: self)
        exchange.client = nil
    }
}
