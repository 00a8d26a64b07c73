import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// One exchange's stream on an origin HTTP/2 connection, as frames: the
/// request's parts go out as HEADERS and DATA (the head held until the next
/// part or a flush, so a bodyless request is one frame), the response's
/// frames come back as HTTP/1-shaped parts. While the client cannot take
/// more, the parts wait here and the stream's window stays shut, so the
/// origin stops at it and memory stays bounded. Confined to the
/// connection's event loop.
final class OriginStream {
    /// Given when its HEADERS go (ids go out in the order they are used).
    private(set) var id: HTTP2StreamID?
    private weak var connection: OriginStreams?
    weak var delegate: (any OriginStreamDelegate)?
    private let eventLoop: EventLoop
    private let scheme: String
    private var method = HTTPMethod.GET
    private var pendingHead: HPACKHeaders?
    private var sentEnd = false
    private var receivedEnd = false
    private var finalHeadSeen = false
    /// Closed, reset or refused: nothing more goes either way.
    private(set) var isClosed = false
    private var failure: Error?
    /// Response parts the client could not take yet, with their DATA bytes.
    private var held = CircularBuffer<(part: HTTPClientResponsePart, bytes: Int)>()
    private var heldBytes = 0
    /// NIO closed the stream while parts were held: reported once they have gone.
    private var closedWhileHeld: Result<Void, Error>?
    private var delivering = false
    /// Handed parts over in the connection's current read: told of its end.
    var inRead = false
    private var inboundWindow: Int?
    /// Request body written and not yet sent (it waits for the origin's window).
    private var unsent = 0
    static let unsentLimit = 64 * 1024

    init(connection: OriginStreams, eventLoop: EventLoop, secure: Bool, delegate: any OriginStreamDelegate) {
        self.connection = connection
        self.eventLoop = eventLoop
        scheme = secure ? "https" : "http"
        self.delegate = delegate
    }

    var isWritable: Bool { !isClosed && unsent < Self.unsentLimit && (connection?.isWritable ?? false) }

    // MARK: the request

    func write(_ part: HTTPClientRequestPart) {
        guard !isClosed, let connection else { return }
        switch part {
        case let .head(head):
            if let problem = UpstreamRequestValidator.problem(head) {
                failed(UpstreamRequestValidator.Refused(description: problem))
                return
            }
            do {
                pendingHead = try HTTP2HeaderMapping.request(head, scheme: scheme)
            } catch {
                failed(error)
                return
            }
            method = head.method
        case let .body(.byteBuffer(buffer)):
            guard sendHead(endStream: false), let id, !sentEnd, buffer.readableBytes > 0 else { return }
            let bytes = buffer.readableBytes
            unsent += bytes
            let promise = eventLoop.makePromise(of: Void.self)
            connection.write(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(buffer)))), promise: promise)
            promise.futureResult.assumeIsolated().whenComplete { [self] _ in sent(bytes) }
        case .body(.fileRegion):
            failed(UpstreamRequestValidator.Refused(description: "a file region cannot go on an HTTP/2 stream"))
        case let .end(trailers?) where !trailers.isEmpty:
            if let problem = UpstreamRequestValidator.problem(trailers) {
                failed(UpstreamRequestValidator.Refused(description: problem))
                return
            }
            guard sendHead(endStream: false), let id, !sentEnd else { return }
            sentEnd = true
            connection.write(
                HTTP2Frame(streamID: id, payload: .headers(.init(headers: HTTP2HeaderMapping.trailers(trailers), endStream: true))))
        case .end:
            if pendingHead != nil {
                _ = sendHead(endStream: true)
                return
            }
            guard let id, !sentEnd else { return }
            sentEnd = true
            connection.write(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(ByteBuffer()), endStream: true))))
        }
    }

    /// A head flushed alone goes at the end of this tick: the request's end
    /// usually follows in it, and then both go as one HEADERS frame (an
    /// origin that has answered a request whose end has not come resets it).
    func flush() {
        // Even once closed: writing the last frame may close the stream in NIO before its flush.
        guard !isClosed else {
            connection?.flush()
            return
        }
        if pendingHead != nil {
            connection?.sendHeadSoon(self)
            return
        }
        connection?.flush()
    }

    /// The end of the tick: a head still held goes without the request's end.
    func sendHeldHead() {
        if pendingHead != nil, !isClosed { _ = sendHead(endStream: false) }
    }

    /// Sends the held head, if any: false when the stream cannot go on.
    private func sendHead(endStream: Bool) -> Bool {
        guard let headers = pendingHead else { return id != nil }
        pendingHead = nil
        guard let connection, let id = connection.number(self) else {
            // The connection takes no new stream now (GOAWAY, or closed): the origin never saw this one.
            refused(heldBack: false)
            return false
        }
        self.id = id
        if endStream { sentEnd = true }
        connection.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: endStream))))
        return true
    }

    private func sent(_ bytes: Int) {
        let wasFull = unsent >= Self.unsentLimit
        unsent -= bytes
        if wasFull, unsent < Self.unsentLimit, !isClosed { delegate?.originStreamWritable(self) }
    }

    /// The exchange is done with the stream: reset unless both ends finished.
    /// A stream NIO opened on the wire, or still holds back behind the
    /// origin's stream limit (its buffer drops it then), is reset; one NIO
    /// refused to open never gets here (`failed`): a reset on a stream the
    /// origin never saw is a protocol error that takes the connection down.
    /// Finished here first: NIO closes the stream within the reset's write.
    func close() {
        guard !isClosed else { return }
        let connection = connection
        let reset = id != nil && !(sentEnd && receivedEnd) && closedWhileHeld == nil
        finish(failure)
        if reset, let id {
            connection?.write(HTTP2Frame(streamID: id, payload: .rstStream(.cancel)))
            connection?.flush()
        }
    }

    // MARK: the response

    func receive(_ payload: HTTP2Frame.FramePayload) {
        guard !isClosed else { return }
        switch payload {
        case let .headers(block):
            do {
                try receiveHeaders(block.headers, endStream: block.endStream)
            } catch {
                failed(error)
            }
        case let .data(data):
            guard case let .byteBuffer(buffer) = data.data else { return }
            if data.endStream { receivedEnd = true }
            if buffer.readableBytes > 0 { deliver(.body(buffer), bytes: buffer.readableBytes) }
            if data.endStream { deliver(.end(nil), bytes: 0) }
        default:
            // RST_STREAM arrives as NIO's StreamClosedEvent; the rest are no part of the message.
            break
        }
    }

    private func receiveHeaders(_ block: HPACKHeaders, endStream: Bool) throws {
        if finalHeadSeen {
            receivedEnd = true
            deliver(.end(HTTP2HeaderMapping.regular(block)), bytes: 0)
            return
        }
        let status = try HTTP2HeaderMapping.status(of: block)
        var head = HTTPResponseHead(version: .http2, status: status, headers: HTTP2HeaderMapping.regular(block))
        if status.code >= 200 {
            finalHeadSeen = true
            // HTTP/2 frames the body itself: the HTTP/1 view gets a length or chunking, as NIO's codec gives it.
            if hasBody(status), !block.contains(name: "content-length") {
                head.headers.add(name: endStream ? "content-length" : "transfer-encoding", value: endStream ? "0" : "chunked")
            }
        }
        if endStream { receivedEnd = true }
        deliver(.head(head), bytes: 0)
        if endStream { deliver(.end(nil), bytes: 0) }
    }

    private func hasBody(_ status: HTTPResponseStatus) -> Bool {
        status.code != 204 && status.code != 304 && method != .HEAD && method != .CONNECT
    }

    private func deliver(_ part: HTTPClientResponsePart, bytes: Int) {
        guard !isClosed else { return }
        if held.isEmpty, !delivering, delegate?.clientIsWritable ?? true {
            hand(part)
        } else {
            held.append((part, bytes))
            heldBytes += bytes
        }
    }

    private func hand(_ part: HTTPClientResponsePart) {
        if !inRead, let connection, connection.isReading {
            inRead = true
            connection.touched(self)
        }
        delivering = true
        delegate?.originStream(self, received: part)
        delivering = false
    }

    /// The client takes more: what waited goes, then the window reopens.
    func clientBecameWritable() {
        guard !delivering, !held.isEmpty || closedWhileHeld != nil else { return }
        var handed = false
        while !isClosed, !held.isEmpty, delegate?.clientIsWritable ?? true {
            let (part, bytes) = held.removeFirst()
            heldBytes -= bytes
            handed = true
            hand(part)
        }
        guard !isClosed else { return }
        if held.isEmpty, let closed = closedWhileHeld {
            closedWhileHeld = nil
            if handed { delegate?.originStreamReadComplete(self) }
            switch closed {
            case .success: finish(nil)
            case let .failure(error): finish(error)
            }
            return
        }
        reopenWindow()
        if handed, !inRead { delegate?.originStreamReadComplete(self) }
    }

    func readComplete() {
        inRead = false
        if !isClosed { delegate?.originStreamReadComplete(self) }
    }

    // MARK: flow control and endings, from the connection

    /// NIO's count of the stream's receive window, after a DATA frame or an update.
    func inboundWindowChanged(_ window: Int) {
        inboundWindow = window
        reopenWindow()
    }

    /// Reopens the window once at most half of it is left, counting held
    /// bytes as unread, as NIO's stream channels do.
    private func reopenWindow() {
        guard !isClosed, closedWhileHeld == nil, !receivedEnd, let id, let window = inboundWindow, let connection else { return }
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
        // What NIO refused first (a stream error it answered with RST_STREAM) says more than the reset.
        let error: Error? = failure ?? reason.map { NIOHTTP2Errors.streamClosed(streamID: id ?? .rootStream, errorCode: $0) }
        guard held.isEmpty else {
            closedWhileHeld = error.map { .failure($0) } ?? .success(())
            return
        }
        finish(error)
    }

    /// The connection went: what was read still goes to the client.
    func connectionClosed() { closedOnWire(reason: nil) }

    func connectionWritable() {
        if !isClosed, unsent < Self.unsentLimit { delegate?.originStreamWritable(self) }
    }

    /// The origin will not process it (above its GOAWAY's last stream id,
    /// or never sent): the exchange may send it again elsewhere.
    /// `heldBack`: its HEADERS wait in NIO's buffer (never sent, and now
    /// never to be): a reset drops them there without touching the wire.
    func refused(heldBack: Bool) {
        guard !isClosed else { return }
        let connection = connection
        finish(NIOHTTP2Errors.streamClosed(streamID: id ?? .rootStream, errorCode: .refusedStream))
        if heldBack, let id {
            connection?.write(HTTP2Frame(streamID: id, payload: .rstStream(.cancel)))
            connection?.flush()
        }
    }

    /// NIO refused a frame of ours on this stream (errors in what the
    /// origin sent reach NIO's StreamClosedEvent instead). A stream NIO did
    /// not open ends here, with no reset; an open one is reset on the next tick.
    func failed(_ error: Error) {
        guard !isClosed else { return }
        failure = error
        guard let id, connection?.isOpen(id) ?? false else {
            finish(error)
            return
        }
        eventLoop.assumeIsolated().execute { [self] in close() }
    }

    private func finish(_ error: Error?) {
        isClosed = true
        held.removeAll()
        heldBytes = 0
        connection?.remove(self)
        delegate?.originStream(self, closed: error)
    }
}
