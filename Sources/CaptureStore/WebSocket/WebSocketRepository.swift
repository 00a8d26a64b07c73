import Foundation
import GRDB

/// Every read and write of WebSocket sockets and their messages. The
/// tunnel's writer applies `WebSocketEvent`s in its commit (`apply`), after
/// the batch's exchange rows; everyone else reads.
public struct WebSocketRepository: Sendable {
    public let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    public static func fileName(requestID: String) -> String { "\(requestID).messages" }

    // MARK: the writer

    /// Applies events in order; returns the payload bytes stored (what
    /// `capture.max_bytes` counts). An event whose handshake row is not
    /// stored (retention took it, the store fell behind) is skipped.
    static func apply(_ events: [WebSocketEvent], _ db: Database) throws -> Int {
        try applyReporting(events, db).added
    }

    /// `apply`, and the sockets whose events were skipped because their row is gone.
    static func applyReporting(_ events: [WebSocketEvent], _ db: Database) throws -> (added: Int, gone: Set<String>) {
        var added = 0
        var gone: Set<String> = []
        var ids: [String: Int64?] = [:]
        func exchangeID(_ requestID: String) throws -> Int64? {
            if let known = ids[requestID] { return known }
            let found = try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM exchanges WHERE request_id = ?"), arguments: [requestID])
            ids[requestID] = .some(found)
            return found
        }
        for event in events {
            switch event {
            case let .opened(opened):
                guard let id = try exchangeID(opened.requestID) else {
                    gone.insert(opened.requestID)
                    continue
                }
                try db.cachedStatement(
                    sql: """
                        INSERT OR IGNORE INTO websockets (exchange_id, opened_at, tunnel_pid, extensions, file) VALUES (?, ?, ?, ?, ?)
                        """
                ).execute(arguments: [id, opened.at, opened.tunnelPID, opened.extensions, fileName(requestID: opened.requestID)])
            case let .messages(messages):
                for m in messages where try exchangeID(m.requestID) == nil { gone.insert(m.requestID) }
                added += try insert(messages, db, exchangeID)
            case let .closed(closed):
                guard let id = try exchangeID(closed.requestID) else { continue }
                try db.cachedStatement(
                    sql: "UPDATE exchanges SET ended_at = ?, bytes_up = ?, bytes_down = ?, error = coalesce(?, error) WHERE id = ?"
                )
                .execute(arguments: [closed.at, closed.bytesUp, closed.bytesDown, closed.error, id])
                try db.cachedStatement(
                    sql: """
                        UPDATE websockets SET closed_at = ?, pings = ?, pongs = ?, close_code = ?, close_reason = ?, closed_by = ?,
                            close_order = (SELECT coalesce(max(close_order), 0) + 1 FROM websockets) WHERE exchange_id = ?
                        """
                ).execute(arguments: [closed.at, closed.pings, closed.pongs, closed.closeCode, closed.closeReason, closed.closedBy, id])
            }
        }
        return (added, gone)
    }

    private static func insert(_ messages: [WebSocketMessageRecord], _ db: Database, _ exchangeID: (String) throws -> Int64?) throws -> Int
    {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO ws_messages (exchange_id, seq, at, from_client, opcode, length, wire_length, frames, compressed,
                                         payload, payload_file, payload_offset, stored, truncated, origin)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        // Per socket: its counts and its row's stored bytes, once per batch.
        var totals: [Int64: (up: Int, down: Int, bytes: Int)] = [:]
        for m in messages {
            guard let id = try exchangeID(m.requestID) else { continue }
            // The date as text from integers: GRDB's DateFormatter would cost more than the insert.
            try statement.execute(arguments: [
                id, m.seq, DatabaseDateText.string(m.at), m.fromClient, m.opcode.rawValue, m.length, m.wireLength, m.frames, m.compressed,
                m.payload, m.file, m.file == nil ? nil : m.fileOffset, m.stored, m.truncated, m.origin.rawValue,
            ])
            var total = totals[id] ?? (0, 0, 0)
            if m.fromClient { total.up += 1 } else { total.down += 1 }
            total.bytes += m.stored
            totals[id] = total
        }
        var added = 0
        for (id, total) in totals {
            try db.cachedStatement(
                sql: "UPDATE websockets SET messages_up = messages_up + ?, messages_down = messages_down + ? WHERE exchange_id = ?"
            )
            .execute(arguments: [total.up, total.down, id])
            try db.cachedStatement(sql: "UPDATE exchanges SET stored_bytes = stored_bytes + ? WHERE id = ?").execute(arguments: [
                total.bytes, id,
            ])
            added += total.bytes
        }
        return added
    }

    /// At a tunnel's start: sockets that a tunnel no longer running left
    /// open are closed, with why (their last message's time as the end).
    public func closeAbandoned(isRunning: @Sendable (Int) -> Bool) async throws -> Int {
        try await database.pool.write { db in
            let open = try Row.fetchAll(db, sql: "SELECT exchange_id, tunnel_pid, opened_at FROM websockets WHERE closed_at IS NULL")
            var closed = 0
            for row in open where !isRunning(row["tunnel_pid"]) {
                let id: Int64 = row["exchange_id"]
                let last =
                    try Date.fetchOne(db, sql: "SELECT max(at) FROM ws_messages WHERE exchange_id = ?", arguments: [id]) ?? row["opened_at"]
                try db.execute(
                    sql: """
                        UPDATE websockets SET closed_at = ?, closed_by = 'proxy', close_order = (SELECT coalesce(max(close_order), 0) + 1 FROM websockets)
                        WHERE exchange_id = ?
                        """, arguments: [last, id])
                try db.execute(
                    sql: "UPDATE exchanges SET ended_at = ?, error = coalesce(error, ?) WHERE id = ?",
                    arguments: [last, "the tunnel that carried this WebSocket stopped before it closed", id])
                closed += 1
            }
            return closed
        }
    }

    // MARK: readers

    public func socket(exchangeID: Int64) throws -> WebSocketRecord? {
        try database.pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM websockets WHERE exchange_id = ?", arguments: [exchangeID]).map(WebSocketRecord.init)
        }
    }

    /// Sockets by exchange id, for a page of rows.
    public func sockets(exchangeIDs: [Int64]) throws -> [Int64: WebSocketRecord] {
        guard !exchangeIDs.isEmpty else { return [:] }
        return try database.pool.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM websockets WHERE exchange_id IN (\(exchangeIDs.map(String.init).joined(separator: ",")))")
            return Dictionary(rows.map { (($0["exchange_id"] as Int64), WebSocketRecord(row: $0)) }, uniquingKeysWith: { a, _ in a })
        }
    }

    /// Sockets still open, newest first.
    public func openSockets(limit: Int = 200) throws -> [(socket: WebSocketRecord, exchange: ExchangeRecord)] {
        try database.pool.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM websockets WHERE closed_at IS NULL ORDER BY exchange_id DESC LIMIT ?", arguments: [limit])
            return try rows.compactMap { row in
                let socket = WebSocketRecord(row: row)
                return try ExchangeRecord.fetchOne(db, key: socket.exchangeID).map { (socket, $0) }
            }
        }
    }

    /// One socket's messages in order, from `afterSeq` on.
    public func messages(of exchange: ExchangeRecord, afterSeq: Int = 0, limit: Int = 10_000) throws -> [WebSocketMessageRecord] {
        guard let id = exchange.id else { return [] }
        return try database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(WebSocketMessageRecord.columns) FROM ws_messages WHERE exchange_id = ? AND seq > ? ORDER BY seq LIMIT ?
                    """, arguments: [id, afterSeq, limit]
            ).map { WebSocketMessageRecord(row: $0, requestID: exchange.requestID) }
        }
    }

    /// Messages stored after the message row `id`, any socket, in the
    /// order stored (`tail --messages`), with each one's exchange id.
    public func stored(after id: Int64, limit: Int = 1000) throws -> [(exchangeID: Int64, message: WebSocketMessageRecord)] {
        try database.pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT m.exchange_id, e.request_id, \(WebSocketMessageRecord.columns.split(separator: ",").map { "m.\($0.trimmingCharacters(in: .whitespaces))" }.joined(separator: ", "))
                    FROM ws_messages m JOIN exchanges e ON e.id = m.exchange_id WHERE m.id > ? ORDER BY m.id LIMIT ?
                    """, arguments: [id, limit]
            ).map { row in (row["exchange_id"], WebSocketMessageRecord(row: row, requestID: row["request_id"])) }
        }
    }

    /// The sockets with messages stored after the message row `id` (at most `limit` of them).
    public func sockets(withMessagesAfter id: Int64, limit: Int = 100) throws -> [Int64] {
        try database.pool.read { db in
            try Int64.fetchAll(db, sql: "SELECT DISTINCT exchange_id FROM ws_messages WHERE id > ? LIMIT ?", arguments: [id, limit])
        }
    }

    /// The sockets that closed after the close numbered `order` (at most
    /// 100), and the last number given (0: none closed yet).
    public func closed(after order: Int64?) throws -> (last: Int64, ids: [Int64]) {
        try database.pool.read { db in
            let last = try Int64.fetchOne(db, sql: "SELECT max(close_order) FROM websockets") ?? 0
            guard let order, last > order else { return (last, []) }
            let ids = try Int64.fetchAll(
                db, sql: "SELECT exchange_id FROM websockets WHERE close_order > ? ORDER BY close_order LIMIT 100", arguments: [order])
            return (last, ids)
        }
    }

    /// Messages in the store, over all sockets.
    public func messageCount() throws -> Int {
        try database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM ws_messages") ?? 0 }
    }

    /// The id of the last message stored, or 0.
    public func lastMessageID() throws -> Int64 {
        try database.pool.read { db in try Int64.fetchOne(db, sql: "SELECT max(id) FROM ws_messages") ?? 0 }
    }

    /// A message's stored payload (its first `limit` bytes): in its row, or
    /// read from the socket's file. Nil when the file does not hold it: still
    /// being written, or lost (a failed write, a file removed).
    public func payload(_ message: WebSocketMessageRecord, limit: Int = .max) throws -> Data? {
        guard let file = message.file else { return (message.payload ?? Data()).prefix(limit) }
        let wanted = min(message.stored, limit)
        guard let window = try? BodyStore(paths: database.paths).read(file, offset: message.fileOffset, length: wanted) else { return nil }
        return window.data.count == wanted ? window.data : nil
    }
}
