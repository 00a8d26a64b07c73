import CaptureStore
import NIOCore
import NIOWebSocket

/// One direction of a socket, frame by frame: which message a frame
/// belongs to (fragments between a text or binary frame and its FIN), and
/// its payload as sent (inflated, under `permessage-deflate`). Checks what
/// RFC 6455 and 7692 ask of the order of frames and their reserved bits.
/// A pure state machine over frames (no I/O): the relay feeds it, the fuzz
/// harness too.
struct WebSocketMessageAssembler {
    private enum State {
        case idle
        case inMessage(opcode: WebSocketMessageRecord.Opcode, compressed: Bool)
    }

    private var state = State.idle
    private let inflater: MessageInflater?

    /// Between a message's first fragment and its last: no other message may start.
    var inMessage: Bool {
        if case .inMessage = state { return true }
        return false
    }
    private let allocator: ByteBufferAllocator

    /// `deflate`: the socket negotiated `permessage-deflate`; `limit`: the
    /// most one compressed message may inflate to.
    init(deflate: Bool, limit: Int = WebSocketLimits.inflatedMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) throws {
        inflater = deflate ? try MessageInflater(limit: limit) : nil
        self.allocator = allocator
    }

    /// `frame`'s data unmasked.
    mutating func take(_ frame: WebSocketFrame) throws(WebSocketViolation) -> WebSocketStep {
        if frame.rsv2 || frame.rsv3 { throw .protocolError("a frame sets RSV2 or RSV3, which no extension negotiated") }
        switch frame.opcode {
        case .connectionClose, .ping, .pong:
            if frame.rsv1 { throw .protocolError("a control frame sets RSV1") }
            if !frame.fin { throw .protocolError("a control frame is fragmented") }
            if frame.data.readableBytes > 125 { throw .protocolError("a control frame carries more than 125 bytes") }
            if frame.opcode == .connectionClose, frame.data.readableBytes == 1 { throw .protocolError("a close frame carries one byte") }
            return .control(frame.opcode, frame.data)
        case .text, .binary:
            guard case .idle = state else { throw .protocolError("a new message began before the last one ended") }
            if frame.rsv1, inflater == nil { throw .protocolError("a frame sets RSV1 though permessage-deflate was not negotiated") }
            let opcode: WebSocketMessageRecord.Opcode = frame.opcode == .text ? .text : .binary
            return .fragment(try fragment(frame, first: true, opcode: opcode, compressed: frame.rsv1))
        case .continuation:
            guard case let .inMessage(opcode, compressed) = state else {
                throw .protocolError("a continuation frame came with no message to continue")
            }
            if frame.rsv1 { throw .protocolError("a continuation frame sets RSV1") }
            return .fragment(try fragment(frame, first: false, opcode: opcode, compressed: compressed))
        default:
            throw .protocolError("a frame has the reserved opcode \(frame.opcode)")
        }
    }

    private mutating func fragment(
        _ frame: WebSocketFrame, first: Bool, opcode: WebSocketMessageRecord.Opcode,
        compressed: Bool
    ) throws(WebSocketViolation) -> WebSocketFragment {
        state = frame.fin ? .idle : .inMessage(opcode: opcode, compressed: compressed)
        var payload = frame.data
        if compressed, let inflater {
            payload = try inflater.inflate(frame.data, last: frame.fin, allocator: allocator)
        }
        return WebSocketFragment(
            first: first, last: frame.fin, opcode: opcode, compressed: compressed, payload: payload, wire: frame.data.readableBytes)
    }
}

/// What the WebSocket layer takes.
enum WebSocketLimits {
    /// One frame, buffered whole by NIO's decoder before it is passed on.
    static let frame = 16 << 20
    /// One compressed message, inflated to record it.
    static let inflatedMessage = 64 << 20
}
