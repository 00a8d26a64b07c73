import CaptureStore
import NIOCore
import NIOWebSocket

/// One direction's message held at a breakpoint: its frames as they came
/// (read whole before it is paused), then, while it waits, every frame that
/// came after it, in order. Resolved, the message goes on (or is edited or
/// dropped) and the frames after it go through the session again.
struct WebSocketHold {
    var opcode: WebSocketMessageRecord.Opcode
    var compressed: Bool
    var frames: [(frame: WebSocketFrame, fragment: WebSocketFragment)] = []
    /// The payload as read (inflated), for the breakpoint's row.
    var payload = ByteBuffer()
    /// Its last fragment came: it is paused now.
    var complete = false
    var after: [(frame: WebSocketFrame, step: WebSocketStep)] = []
    /// The holding side's end (its FIN, or its close) came while it waited:
    /// carried across once the message and what came after it have gone.
    enum End { case inputClosed, closed }
    var end: End?

    init(first: WebSocketFragment) {
        opcode = first.opcode
        compressed = first.compressed
    }

    mutating func add(_ frame: WebSocketFrame, _ fragment: WebSocketFragment) {
        frames.append((frame, fragment))
        payload.writeImmutableBuffer(fragment.payload)
        complete = fragment.last
    }
}
