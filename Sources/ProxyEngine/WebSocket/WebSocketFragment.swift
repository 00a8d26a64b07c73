import CaptureStore
import NIOCore
import NIOWebSocket

/// What one data frame adds to its message, as the assembler reads it: the
/// payload bytes it carries (inflated when compressed), and whether it
/// opens or ends the message.
struct WebSocketFragment {
    var first: Bool
    var last: Bool
    var opcode: WebSocketMessageRecord.Opcode
    var compressed: Bool
    var payload: ByteBuffer
    /// The frame's payload bytes on the wire.
    var wire: Int
}

/// One frame as the assembler reads it: a part of a message, or a control frame.
enum WebSocketStep {
    case fragment(WebSocketFragment)
    case control(WebSocketOpcode, ByteBuffer)
}
