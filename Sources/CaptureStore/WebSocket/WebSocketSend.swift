import Foundation
import GRDB

/// A message someone asked to send into an open socket: a row of `ws_sends`.
public struct WebSocketSend: Sendable, Equatable {
    public var id: Int64
    public var exchangeID: Int64
    /// The handshake's request id: how the tunnel finds the socket.
    public var requestID: String
    public var toClient: Bool
    public var opcode: WebSocketMessageRecord.Opcode
    public var payload: Data
    public var sentAt: Date?
    public var seq: Int?
    public var error: String?

    init(row: Row) {
        id = row["id"]
        exchangeID = row["exchange_id"]
        requestID = row["request_id"]
        toClient = row["to_client"]
        opcode = WebSocketMessageRecord.Opcode(rawValue: row["opcode"]) ?? .binary
        payload = row["payload"]
        sentAt = row["sent_at"]
        seq = row["seq"]
        error = row["error"]
    }
}
