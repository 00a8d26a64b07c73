import CaptureStore
import NIOCore
import NIOWebSocket

/// What follows a socket's frames after its `101` (the capture): told every
/// data fragment and control frame as it is forwarded, each read burst's
/// end, and the close. On the connection's event loop.
protocol WebSocketObserver: AnyObject {
    func fragment(_ fragment: WebSocketFragment, fromClient: Bool)
    func control(_ opcode: WebSocketOpcode, fromClient: Bool)
    /// A whole message that did not come as it was read: the proxy's own
    /// (`busymate ws send`), a held one edited, or one dropped. Returns its
    /// number on the socket when the observer numbers messages.
    func message(_ opcode: WebSocketMessageRecord.Opcode, _ payload: ByteBuffer, fromClient: Bool, origin: WebSocketMessageRecord.Origin)
        -> Int?
    /// A read burst ended: what gathered may go to the store.
    func readComplete()
    /// Both sides have closed.
    func closed(_ closing: WebSocketClosing)
    /// True while the store is behind: the socket stops reading until `whenCaughtUp` runs.
    var isBehind: Bool { get }
    func whenCaughtUp(_ body: @escaping @Sendable () -> Void)
}
