import Foundation
import GRDB

/// A WebSocket that an exchange's `101` opened: open until `closedAt`, with
/// its messages counted each way, its pings and pongs, and how it closed
/// (the first close frame's code and reason, and who sent it).
public struct WebSocketRecord: Sendable, Equatable {
    public var exchangeID: Int64
    public var openedAt: Date
    public var closedAt: Date?
    /// The tunnel that carries it: a socket left open by a tunnel that is gone is closed at the next start.
    public var tunnelPID: Int
    /// `Sec-WebSocket-Extensions` as the server accepted it.
    public var extensions: String?
    public var messagesUp: Int
    public var messagesDown: Int
    public var pings: Int
    public var pongs: Int
    public var closeCode: Int?
    public var closeReason: String?
    /// `client`, `server` or `proxy`: who closed first.
    public var closedBy: String?
    /// The socket's file of large payloads (may not exist: no payload was large).
    public var file: String

    public var isOpen: Bool { closedAt == nil }

    init(row: Row) {
        exchangeID = row["exchange_id"]
        openedAt = row["opened_at"]
        closedAt = row["closed_at"]
        tunnelPID = row["tunnel_pid"]
        extensions = row["extensions"]
        messagesUp = row["messages_up"]
        messagesDown = row["messages_down"]
        pings = row["pings"]
        pongs = row["pongs"]
        closeCode = row["close_code"]
        closeReason = row["close_reason"]
        closedBy = row["closed_by"]
        file = row["file"]
    }
}
