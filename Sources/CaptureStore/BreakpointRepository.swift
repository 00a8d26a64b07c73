import Foundation
import GRDB

/// `breakpoint_events`: what the tunnel holds, what the CLI asks of it, and
/// what became of it. SQLite decides who resolves a held message first.
public struct BreakpointRepository: Sendable {
    let database: CaptureDatabase
    /// Resolved events kept besides the held ones (they hold whole messages).
    public static let keepResolved = 1_000

    public init(database: CaptureDatabase) { self.database = database }

    /// Records a held message; returns it with its id.
    public func pause(_ event: BreakpointEvent) throws -> BreakpointEvent {
        try database.pool.write { db in
            var event = event
            try event.insert(db)
            try db.execute(
                sql: """
                    DELETE FROM breakpoint_events WHERE outcome IS NOT NULL AND id <= (
                      SELECT id FROM breakpoint_events WHERE outcome IS NOT NULL ORDER BY id DESC LIMIT 1 OFFSET ?)
                    """, arguments: [Self.keepResolved])
            return event
        }
    }

    public func find(id: Int64) throws -> BreakpointEvent? {
        try database.pool.read { db in try BreakpointEvent.fetchOne(db, key: id) }
    }

    /// Held messages, oldest first.
    public func held() throws -> [BreakpointEvent] {
        try database.pool.read { db in
            try BreakpointEvent.filter(Column("outcome") == nil).order(Column("id")).fetchAll(db)
        }
    }

    /// What was asked of a held message, without the message.
    public struct Pending: Sendable, FetchableRecord, Decodable {
        public var id: Int64
        public var requestID: String
        public var requested: BreakpointEvent.Request
        public var rawHTTPRequested: Data?

        enum CodingKeys: String, CodingKey {
            case id, requestID = "request_id", requested, rawHTTPRequested = "raw_http_requested"
        }
    }

    /// Held messages someone asked something of (the tunnel carries it out).
    public func pending() throws -> [Pending] {
        try database.pool.read { db in
            try Pending.fetchAll(
                db,
                sql: """
                    SELECT id, request_id, requested, raw_http_requested FROM breakpoint_events
                    WHERE outcome IS NULL AND requested IS NOT NULL ORDER BY id
                    """)
        }
    }

    /// One exchange's events (its request, then its response).
    public func events(requestID: String) throws -> [BreakpointEvent] {
        try database.pool.read { db in
            try BreakpointEvent.filter(Column("request_id") == requestID).order(Column("id")).fetchAll(db)
        }
    }

    /// Which of these exchanges (by request id) met a breakpoint.
    public func held(among requestIDs: [String]) throws -> Set<String> {
        guard !requestIDs.isEmpty else { return [] }
        return try database.pool.read { db in
            Set(
                try String.fetchAll(
                    db, SQLRequest(literal: "SELECT DISTINCT request_id FROM breakpoint_events WHERE request_id IN \(requestIDs)")))
        }
    }

    /// Events paused after `id`, oldest first.
    public func events(after id: Int64, limit: Int) throws -> [BreakpointEvent] {
        try database.pool.read { db in try BreakpointEvent.filter(Column("id") > id).order(Column("id")).limit(limit).fetchAll(db) }
    }

    /// The newest events, held or resolved.
    public func recent(limit: Int) throws -> [BreakpointEvent] {
        try database.pool.read { db in try BreakpointEvent.order(Column("id").desc).limit(limit).fetchAll(db) }
    }

    public enum Claim: Sendable, Equatable {
        /// This request is the one the tunnel will carry out.
        case claimed
        /// Someone asked first, or the message is no longer held.
        case lost(BreakpointEvent)
        case notFound
    }

    /// Asks for a resolution; only the first asker of a held message wins.
    public func request(id: Int64, _ request: BreakpointEvent.Request, raw: Data? = nil, at date: Date = Date()) throws -> Claim {
        try database.pool.write { db in
            try db.execute(
                sql: """
                    UPDATE breakpoint_events SET requested = ?, raw_http_requested = ?, requested_at = ?
                    WHERE id = ? AND requested IS NULL AND outcome IS NULL
                    """, arguments: [request.rawValue, raw, date, id])
            if db.changesCount == 1 { return .claimed }
            guard let event = try BreakpointEvent.fetchOne(db, key: id) else { return .notFound }
            return .lost(event)
        }
    }

    /// Takes back a request the tunnel could not carry out (an edit that
    /// does not parse): the message stays held.
    public func withdraw(id: Int64) throws {
        try database.pool.write { db in
            try db.execute(
                sql:
                    "UPDATE breakpoint_events SET requested = NULL, raw_http_requested = NULL, requested_at = NULL WHERE id = ? AND outcome IS NULL",
                arguments: [id])
        }
    }

    /// Records what became of a held message.
    public func resolve(id: Int64, _ outcome: BreakpointEvent.Outcome, final: Data?, at date: Date = Date()) throws {
        try database.pool.write { db in
            try db.execute(
                sql: "UPDATE breakpoint_events SET outcome = ?, raw_http_final = ?, resumed_at = ? WHERE id = ? AND outcome IS NULL",
                arguments: [outcome.rawValue, final, date, id])
        }
    }

    /// Marks held messages whose tunnel is gone as abandoned; returns how many.
    @discardableResult
    public func abandon(unless isAlive: (Int32) -> Bool, at date: Date = Date()) throws -> Int {
        try database.pool.write { db in
            let held = try BreakpointEvent.filter(Column("outcome") == nil).fetchAll(db)
            var count = 0
            for event in held where !isAlive(event.tunnelPID) {
                try db.execute(
                    sql: "UPDATE breakpoint_events SET outcome = ?, resumed_at = ? WHERE id = ? AND outcome IS NULL",
                    arguments: [BreakpointEvent.Outcome.abandoned.rawValue, date, event.id])
                count += db.changesCount
            }
            return count
        }
    }
}
