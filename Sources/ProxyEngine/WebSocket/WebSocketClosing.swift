/// How a socket ended, for its row: the first close frame (its code and
/// reason, and who sent it), what the proxy saw go wrong, and the bytes
/// each way on the wire.
struct WebSocketClosing {
    var closeCode: Int?
    var closeReason: String?
    /// `client`, `server` or `proxy`; nil when no close frame came (a dropped connection).
    var closedBy: String?
    var error: String?
    var bytesUp = 0
    var bytesDown = 0
    var pings = 0
    var pongs = 0
}
