import BusymateShared
import Foundation
import GRDB

/// The store as a cloud sink's outbox: rows captured here (not HAR
/// imports, another device's traffic) go out in id order, and a
/// sink's cursor (`cloud_cursors`) is the last id the server acknowledged.
/// Nothing else marks a row sent, so a crash between the server's answer
/// and the cursor's update sends the batch again (the server ignores
/// duplicates of `(request_id, ts)`).
public struct CloudOutbox: Sendable {
    public let database: CaptureDatabase
    /// `postgrest` or `postgres`: each sink keeps its own cursor.
    public let sink: String

    public init(database: CaptureDatabase, sink: String) {
        self.database = database
        self.sink = sink
    }

    public struct Cursor: Sendable, Equatable {
        public var account: String?
        public var sentID: Int64
        public var sentRows: Int
        public var sentAt: Date?
        /// Rows retention or "clear" removed before they were sent.
        public var droppedUnsent: Int
        /// Rows the server refused one by one (logged with their request ids).
        public var rejected: Int
        public var startedAt: Date
    }

    /// One row as the sink sends it.
    public struct Row: Sendable {
        public var id: Int64
        public var requestID: String
        public var startedAt: Date
        public var record: ExchangeRecord
    }

    public func cursor() async throws -> Cursor? {
        try await database.pool.read { db in try Self.cursor(db, sink) }
    }

    static func cursor(_ db: Database, _ sink: String) throws -> Cursor? {
        guard let row = try GRDB.Row.fetchOne(db, sql: "SELECT * FROM cloud_cursors WHERE sink = ?", arguments: [sink]) else { return nil }
        return Cursor(
            account: row["account"], sentID: row["sent_id"], sentRows: row["sent_rows"], sentAt: row["sent_at"],
            droppedUnsent: row["dropped_unsent"], rejected: row["rejected"], startedAt: row["started_at"])
    }

    /// The cursor for `account`: the one kept when it is the same account
    /// (a re-pairing goes on where the last token stopped); for an account
    /// seen first, a new one just before the first row started at `since`
    /// or later (the pairing's time: nothing captured before goes to it, and
    /// nothing after is skipped however late the sink reads the pairing).
    public func open(account: String, since: Date) async throws -> Cursor {
        try await database.pool.write { db in
            if let cursor = try Self.cursor(db, sink), cursor.account == account { return cursor }
            let first = try Int64.fetchOne(db, sql: "SELECT min(id) FROM exchanges WHERE started_at >= ?", arguments: [since])
            let end = try first.map { $0 - 1 } ?? Int64.fetchOne(db, sql: "SELECT max(id) FROM exchanges") ?? 0
            let now = Date()
            try db.execute(
                sql: """
                    INSERT INTO cloud_cursors (sink, account, sent_id, sent_rows, dropped_unsent, rejected, started_at) VALUES (?, ?, ?, 0, 0, 0, ?)
                    ON CONFLICT (sink) DO UPDATE SET account = excluded.account, sent_id = excluded.sent_id, sent_rows = 0, sent_at = NULL,
                    dropped_unsent = 0, rejected = 0, started_at = excluded.started_at
                    """, arguments: [sink, account, end, now])
            return Cursor(account: account, sentID: end, sentRows: 0, sentAt: nil, droppedUnsent: 0, rejected: 0, startedAt: now)
        }
    }

    /// Unpaired: the cursor goes, and a later pairing starts at the store's end.
    public func forget() async throws {
        try await database.pool.write { db in try db.execute(sql: "DELETE FROM cloud_cursors WHERE sink = ?", arguments: [sink]) }
    }

    /// The next rows after `id`: at most `limit`.
    public func rows(after id: Int64, limit: Int) async throws -> [Row] {
        try await database.pool.read { db in try Self.rows(db, after: id, limit: limit) }
    }

    /// The same, blocking: for a thread of the caller's own.
    public func readRows(after id: Int64, limit: Int) throws -> [Row] {
        try database.pool.read { db in try Self.rows(db, after: id, limit: limit) }
    }

    private static func rows(_ db: Database, after id: Int64, limit: Int) throws -> [Row] {
        try ExchangeRecord.fetchAll(
            db, sql: "SELECT * FROM exchanges WHERE id > ? AND imported IS NULL ORDER BY id LIMIT ?", arguments: [id, limit]
        ).compactMap { record in
            record.id.map { Row(id: $0, requestID: record.requestID, startedAt: record.startedAt, record: record) }
        }
    }

    /// The server has `through` and every row before it (`sent` of them
    /// in this batch). Only forward: a late answer never moves it back.
    public func advance(through id: Int64, sent: Int, rejected: Int = 0) async throws {
        try await database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE cloud_cursors SET sent_id = max(sent_id, ?), sent_rows = sent_rows + ?, rejected = rejected + ?, sent_at = ? WHERE sink = ?
                    """, arguments: [id, sent, rejected, Date(), sink])
        }
    }

    /// Rows not sent yet, and when the oldest of them was captured.
    public func backlog(after id: Int64) async throws -> (rows: Int, oldest: Date?) {
        try await database.pool.read { db in
            let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM exchanges WHERE id > ? AND imported IS NULL", arguments: [id]) ?? 0
            let oldest = try Date.fetchOne(
                db, sql: "SELECT started_at FROM exchanges WHERE id > ? AND imported IS NULL ORDER BY id LIMIT 1", arguments: [id])
            return (count, oldest)
        }
    }

    /// Every sink's cursor (for `busymate cloud status`).
    public static func cursors(_ database: CaptureDatabase) throws -> [(sink: String, cursor: Cursor, backlog: Int, oldest: Date?)] {
        try database.pool.read { db in
            let sinks = try String.fetchAll(db, sql: "SELECT sink FROM cloud_cursors ORDER BY sink")
            return try sinks.compactMap { sink in
                guard let cursor = try cursor(db, sink) else { return nil }
                let count =
                    try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM exchanges WHERE id > ? AND imported IS NULL", arguments: [cursor.sentID]) ?? 0
                let oldest = try Date.fetchOne(
                    db, sql: "SELECT started_at FROM exchanges WHERE id > ? AND imported IS NULL ORDER BY id LIMIT 1",
                    arguments: [cursor.sentID])
                return (sink, cursor, count, oldest)
            }
        }
    }

    /// Retention or "clear" is about to delete rows `after` < id ≤
    /// `through` matching `condition`: those no sink has sent are counted
    /// against each sink.
    static func noteDropping(_ db: Database, after: Int64, through: Int64, where condition: String) throws {
        try db.cachedStatement(
            sql: """
                UPDATE cloud_cursors SET dropped_unsent = dropped_unsent + (
                    SELECT count(*) FROM exchanges WHERE id > max(?, cloud_cursors.sent_id) AND id <= ? AND imported IS NULL AND \(condition))
                WHERE sent_id < ?
                """
        ).execute(arguments: [after, through, through])
    }
}
