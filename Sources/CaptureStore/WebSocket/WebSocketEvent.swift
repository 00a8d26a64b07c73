import Foundation

/// What the data path tells the store about a socket, in order: it opened
/// (after its handshake's row), messages came, it closed.
public enum WebSocketEvent: Sendable {
    public struct Opened: Sendable {
        public var requestID: String
        public var at: Date
        public var tunnelPID: Int
        public var extensions: String?
        public init(requestID: String, at: Date, tunnelPID: Int, extensions: String?) {
            self.requestID = requestID
            self.at = at
            self.tunnelPID = tunnelPID
            self.extensions = extensions
        }
    }

    public struct Closed: Sendable {
        public var requestID: String
        public var at: Date
        public var pings: Int
        public var pongs: Int
        public var closeCode: Int?
        public var closeReason: String?
        public var closedBy: String?
        /// Bytes each way on the wire, frames and all.
        public var bytesUp: Int
        public var bytesDown: Int
        public var error: String?
        public init(
            requestID: String, at: Date, pings: Int, pongs: Int, closeCode: Int?, closeReason: String?, closedBy: String?,
            bytesUp: Int, bytesDown: Int, error: String?
        ) {
            self.requestID = requestID
            self.at = at
            self.pings = pings
            self.pongs = pongs
            self.closeCode = closeCode
            self.closeReason = closeReason
            self.closedBy = closedBy
            self.bytesUp = bytesUp
            self.bytesDown = bytesDown
            self.error = error
        }
    }

    case opened(Opened)
    case messages([WebSocketMessageRecord])
    case closed(Closed)

    /// Rows this event adds (what the writer counts as waiting).
    public var weight: Int {
        if case let .messages(list) = self { return list.count }
        return 1
    }
}
