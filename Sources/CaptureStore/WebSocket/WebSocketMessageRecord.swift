import Foundation
import GRDB

/// One WebSocket message of a socket whose handshake is an exchange's row:
/// its direction, kind, sizes and payload (decompressed when the socket
/// negotiated `permessage-deflate`). Small payloads sit in the row; larger
/// ones in the socket's file under `bodies/` at `fileOffset`.
public struct WebSocketMessageRecord: Sendable, Equatable {
    /// How the message came to be on the socket.
    public enum Origin: String, Sendable, Codable {
        /// As one side sent it.
        case relayed
        /// Sent by the proxy (`busymate ws send`, the page's composer).
        case injected
        /// Held at a breakpoint and changed before it went on.
        case edited
        /// Held at a breakpoint and never delivered.
        case dropped
    }

    public enum Opcode: Int, Sendable, Codable {
        case text = 1
        case binary = 2
    }

    /// The row's own id (nil until stored).
    public var id: Int64?
    /// The handshake's request id.
    public var requestID: String
    /// Its number on the socket, from 1, both directions counted together.
    public var seq: Int
    public var at: Date
    public var fromClient: Bool
    public var opcode: Opcode
    /// The payload's length (decompressed).
    public var length: Int
    /// Payload bytes as they crossed the wire (compressed, over every fragment).
    public var wireLength: Int
    public var frames: Int
    public var compressed: Bool
    /// The stored bytes when they are in the row.
    public var payload: Data?
    /// The socket's file, when the stored bytes are there instead.
    public var file: String?
    public var fileOffset: Int
    /// Bytes stored: all of `length` unless `truncated` (`capture.body_max`,
    /// or a disk that fell behind).
    public var stored: Int
    public var truncated: Bool
    public var origin: Origin

    public init(
        requestID: String, seq: Int, at: Date, fromClient: Bool, opcode: Opcode, length: Int, wireLength: Int, frames: Int = 1,
        compressed: Bool = false, payload: Data? = nil, file: String? = nil, fileOffset: Int = 0, stored: Int = 0,
        truncated: Bool = false, origin: Origin = .relayed
    ) {
        self.requestID = requestID
        self.seq = seq
        self.at = at
        self.fromClient = fromClient
        self.opcode = opcode
        self.length = length
        self.wireLength = wireLength
        self.frames = frames
        self.compressed = compressed
        self.payload = payload
        self.file = file
        self.fileOffset = fileOffset
        self.stored = stored
        self.truncated = truncated
        self.origin = origin
    }

    static let columns =
        "id, seq, at, from_client, opcode, length, wire_length, frames, compressed, payload, payload_file, payload_offset, stored, truncated, origin"

    init(row: Row, requestID: String) {
        id = row["id"]
        self.requestID = requestID
        seq = row["seq"]
        at = row["at"]
        fromClient = row["from_client"]
        opcode = Opcode(rawValue: row["opcode"]) ?? .binary
        length = row["length"]
        wireLength = row["wire_length"]
        frames = row["frames"]
        compressed = row["compressed"]
        payload = row["payload"]
        file = row["payload_file"]
        fileOffset = row["payload_offset"] ?? 0
        stored = row["stored"]
        truncated = row["truncated"]
        origin = Origin(rawValue: row["origin"] ?? "") ?? .relayed
    }
}
