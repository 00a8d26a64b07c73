import BusymateShared
import Foundation
import GRDB

/// Messages to send into open sockets: the CLI and the page ask
/// (`request`), the tunnel that carries the socket claims each one once
/// and says how it went.
public struct WebSocketSendRepository: Sendable {
    public let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The largest message sent this way.
    public static let maxPayload = 16 << 20

    /// Asks for `payload` to go into exchange `exchangeID`'s socket; returns the request's id.
    public func request(exchangeID: Int64, toClient: Bool, opcode: WebSocketMessageRecord.Opcode, payload: Data) throws -> Int64 {
        guard payload.count <= Self.maxPayload else {
            throw Refusal(description: "the message is \(payload.count) bytes; at most \(Self.maxPayload) are sent this way")
        }
        return try database.pool.write { db in
            guard
                let open = try Bool.fetchOne(
                    db, sql: "SELECT closed_at IS NULL FROM websockets WHERE exchange_id = ?", arguments: [exchangeID])
            else {
                throw Refusal(description: "exchange \(exchangeID) is no WebSocket the proxy read (see `busymate list '~websocket'`)")
            }
            guard open else { throw Refusal(description: "exchange \(exchangeID)'s WebSocket is closed") }
            try db.execute(
                sql: "INSERT INTO ws_sends (exchange_id, to_client, opcode, payload, requested_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [exchangeID, toClient, opcode.rawValue, payload, Date()])
            return db.lastInsertedRowID
        }
    }

    /// Sends nobody has claimed yet into open sockets, asked for in the last half minute, oldest first.
    public func pending() throws -> [WebSocketSend] {
        try database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT s.*, e.request_id FROM ws_sends s JOIN exchanges e ON e.id = s.exchange_id
                    JOIN websockets w ON w.exchange_id = s.exchange_id
                    WHERE s.claimed_by IS NULL AND s.error IS NULL AND w.closed_at IS NULL AND s.requested_at > ? ORDER BY s.id LIMIT 100
                    """, arguments: [Date().addingTimeInterval(-Self.staleAfter)]
            ).map(WebSocketSend.init)
        }
    }

    /// A send nobody claimed for this long is left alone (its asker gave up at 10 s).
    static let staleAfter: TimeInterval = 30

    /// True when this tunnel (`pid`) now owns the send: nobody else will carry it out.
    public func claim(_ id: Int64, pid: Int) throws -> Bool {
        try database.pool.write { db in
            try db.execute(
                sql: "UPDATE ws_sends SET claimed_by = ? WHERE id = ? AND claimed_by IS NULL AND error IS NULL", arguments: [pid, id])
            return db.changesCount == 1
        }
    }

    public func sent(_ id: Int64, seq: Int) throws {
        try database.pool.write { db in
            try db.execute(sql: "UPDATE ws_sends SET sent_at = ?, seq = ? WHERE id = ?", arguments: [Date(), seq, id])
        }
    }

    /// Refused (`why`); a send still unclaimed is withdrawn this way too.
    /// False when it was claimed meanwhile (it goes on).
    @discardableResult
    public func fail(_ id: Int64, _ why: String, onlyUnclaimed: Bool = false) throws -> Bool {
        try database.pool.write { db in
            try db.execute(
                sql:
                    "UPDATE ws_sends SET error = ? WHERE id = ? AND sent_at IS NULL AND error IS NULL\(onlyUnclaimed ? " AND claimed_by IS NULL" : "")",
                arguments: [why, id])
            return db.changesCount == 1
        }
    }

    public func find(_ id: Int64) throws -> WebSocketSend? {
        try database.pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT s.*, e.request_id FROM ws_sends s JOIN exchanges e ON e.id = s.exchange_id WHERE s.id = ?",
                arguments: [id]
            ).map(WebSocketSend.init)
        }
    }

    /// Whether the socket is still open in the store (a closed or gone one takes no more).
    public func isOpen(exchangeID: Int64) throws -> Bool {
        try database.pool.read { db in
            try Bool.fetchOne(db, sql: "SELECT closed_at IS NULL FROM websockets WHERE exchange_id = ?", arguments: [exchangeID]) ?? false
        }
    }

    /// Asks, tells the tunnel, and waits (up to ten seconds) for the send to
    /// be carried out; returns the message's number on the socket. Blocks.
    public func send(
        exchangeID: Int64, toClient: Bool, opcode: WebSocketMessageRecord.Opcode, payload: Data, paths: GroupPaths, sender: String
    ) throws -> Int {
        let id = try request(exchangeID: exchangeID, toClient: toClient, opcode: opcode, payload: payload)
        Self.announce(id, paths: paths, sender: sender)
        let asked = Date()
        while true {
            if let seq = try outcome(id, askedAt: asked) { return seq }
            usleep(20_000)
        }
    }

    /// Tells the tunnels a send waits.
    public static func announce(_ id: Int64, paths: GroupPaths, sender: String) {
        if let notifier = try? Notifier(paths: paths, role: sender) {
            notifier.post(.webSocketSend, payload: "\(id)")
            notifier.close()
        }
    }

    /// The send's number once sent; nil while it waits; throws when it was
    /// refused, or nobody took it within 10 s of `askedAt` (it is withdrawn).
    public func outcome(_ id: Int64, askedAt: Date) throws -> Int? {
        guard let now = try find(id) else { throw Refusal(description: "the socket's exchange is gone from the store") }
        if let seq = now.seq, now.sentAt != nil { return seq }
        if let error = now.error { throw Refusal(description: error) }
        let waited = Date().timeIntervalSince(askedAt)
        if waited >= 10, try fail(id, "not sent within 10 s: no tunnel carried it out", onlyUnclaimed: true) {
            throw Refusal(description: "not sent: no tunnel took the message within 10 s (is the tunnel running? busymate status)")
        }
        if waited >= 25 { throw Refusal(description: "the tunnel took the message but said nothing of it within 25 s (see journalctl)") }
        return nil
    }
}
