/// Why a socket was ended by the proxy: what a side sent breaks RFC 6455
/// (or 7692), or a message is larger than the proxy takes.
enum WebSocketViolation: Error, Equatable, CustomStringConvertible {
    case protocolError(String)
    case badCompression(String)
    case tooBig(Int)

    /// The close code both sides are sent.
    var closeCode: UInt16 {
        switch self {
        case .protocolError: 1002
        case .badCompression: 1007
        case .tooBig: 1009
        }
    }

    var description: String {
        switch self {
        case let .protocolError(what): "WebSocket protocol error: \(what)"
        case let .badCompression(what): "a compressed WebSocket message does not inflate: \(what)"
        case let .tooBig(limit): "a WebSocket message inflates past \(limit >> 20) MiB (a deflate bomb?)"
        }
    }
}
