import Foundation
import GRDB

/// Every read and write of captured exchanges.
public struct TrafficRepository: Sendable {
    public let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    /// One transaction for a batch: the tunnel's writer calls this.
    public func insert(_ records: [ExchangeRecord]) throws -> [ExchangeRecord] {
        try database.pool.write { db in
            let inserted = try records.map { record in
                var record = record
                try record.insert(db, onConflict: .ignore)
                return record
            }
            try HostIndex.catchUp(db)
            return inserted
        }
    }

    /// The tunnel writer's commit: the batch (one cached statement bound
    /// directly, no ids read back), then retention in the same
    /// transaction. `size` is what the writer last knew of the store (nil:
    /// measure it once); the answer carries the new size and the body
    /// files to remove once the transaction is committed.
    public func save(_ records: [ExchangeRecord], keeping retention: Retention, size: Size?) async throws -> Trimmed {
        try await database.pool.write { db in
            var size = try size ?? Self.size(db)
            try Self.insert(records, db)
            size.exchanges += records.count
            size.bytes += records.reduce(0) { $0 + $1.storedBytes }
            return try Self.trim(db, retention, size)
        }
    }

    private static func insert(_ records: [ExchangeRecord], _ db: Database) throws {
        let insert = try ExchangeInsert(db)
        for record in records { try insert.execute(record) }
        try HostIndex.catchUp(db)
    }

    public struct Filter: Sendable {
        public var hostGlob: String?
        public var method: String?
        /// Inclusive status range (`4xx` → 400...499).
        public var status: ClosedRange<Int>?
        public var since: Date?
        public var search: String?
        /// A filter in the filter language (`CaptureFilter.parse`).
        public var expression: CaptureFilter?
        /// Only rows older than this id's (the next page).
        public var before: Int64?
        public var limit: Int = 50
        public init() {}

        var page: ExchangePage {
            var conditions: [SQL] = []
            var hosts: [SQL] = []
            if let glob = hostGlob {
                conditions.append("host GLOB \(glob.lowercased())")
                hosts.append("host GLOB \(glob.lowercased())")
            }
            if let method { conditions.append("method = \(method.uppercased())") }
            if let status { conditions.append("status BETWEEN \(status.lowerBound) AND \(status.upperBound)") }
            if let since { conditions.append("started_at >= \(DatabaseDateText.string(since))") }
            if let search {
                // `--search TEXT`: the text, any case, in the URL (as sent or decoded), a header line or a body.
                let text = NSRegularExpression.escapedPattern(for: search)
                let clauses: [CaptureFilter] = [.clause(.url(text)), .clause(.header(text, .either)), .clause(.body(text, .either))]
                conditions.append(clauses.dropFirst().reduce(clauses[0]) { .or($0, $1) }.sql)
            }
            if let expression {
                conditions.append(expression.sql)
                if let named = expression.hosts { hosts.append(named.sql) }
            }
            let host = hosts.first.map { first in hosts.dropFirst().reduce(first) { all, next -> SQL in "(\(all)) AND (\(next))" } }
            return ExchangePage(conditions: conditions, before: before, hosts: host, limit: limit)
        }
    }

    /// Newest first (`ExchangePage` says how).
    public func list(_ filter: Filter) throws -> [ExchangeRecord] {
        try database.pool.read { db in try filter.page.fetch(db) }
    }

    /// Rows stored after `id` that `filter` keeps, in the order stored
    /// (`tail`): by rowid, whatever the store's size. With them, the last
    /// id stored when they were read (the next call starts there, unless
    /// the limit cut the answer short).
    public func stored(after id: Int64, _ filter: Filter) throws -> (records: [ExchangeRecord], last: Int64) {
        try database.pool.read { db in
            let last = try Int64.fetchOne(db, sql: "SELECT max(id) FROM exchanges") ?? 0
            let conditions = filter.page.conditions.reduce(SQL("id > \(id) AND id <= \(last)")) { "\($0) AND (\($1))" }
            let query: SQL = "SELECT * FROM exchanges NOT INDEXED WHERE \(conditions) ORDER BY id LIMIT \(filter.limit)"
            return (try ExchangeRecord.fetchAll(db, SQLRequest(literal: query)), last)
        }
    }

    /// The id of the last row stored, or 0.
    public func lastID() throws -> Int64 {
        try database.pool.read { db in try Int64.fetchOne(db, sql: "SELECT max(id) FROM exchanges") ?? 0 }
    }

    public func find(id: Int64) throws -> ExchangeRecord? {
        try database.pool.read { db in try ExchangeRecord.fetchOne(db, key: id) }
    }

    public func find(requestID: String) throws -> ExchangeRecord? {
        try database.pool.read { db in try ExchangeRecord.filter(Column("request_id") == requestID).fetchOne(db) }
    }

    /// Exchanges whose request id starts with `prefix` (lowercase), in id order.
    public func find(requestIDPrefix prefix: String, limit: Int) throws -> [ExchangeRecord] {
        try database.pool.read { db in
            // A range over the unique index: request ids are lowercase hex and dashes.
            try ExchangeRecord.filter(sql: "request_id >= ? AND request_id < ?", arguments: [prefix, prefix + "\u{7F}"])
                .order(Column("id")).limit(limit).fetchAll(db)
        }
    }

    public func count() throws -> Int {
        try database.pool.read { db in try ExchangeRecord.fetchCount(db) }
    }

    /// How much the store keeps: `capture.max_exchanges` and `capture.max_bytes`.
    public struct Retention: Sendable, Equatable {
        public var maxExchanges: Int
        public var maxBytes: Int
        public init(maxExchanges: Int, maxBytes: Int) {
            self.maxExchanges = maxExchanges
            self.maxBytes = maxBytes
        }
    }

    /// Exchanges and stored body bytes: what retention weighs.
    public struct Size: Sendable, Equatable {
        public var exchanges: Int
        public var bytes: Int
        public init(exchanges: Int, bytes: Int) {
            self.exchanges = exchanges
            self.bytes = bytes
        }
    }

    /// What a commit left: the store's size, and what retention took.
    public struct Trimmed: Sendable {
        public var size: Size
        public var removed: Int
        /// Body files of removed exchanges, to delete after the commit.
        public var files: [String]
    }

    /// One scan: the writer measures once, then counts what it adds and removes.
    static func size(_ db: Database) throws -> Size {
        let row = try Row.fetchOne(db, sql: "SELECT count(*), total(stored_bytes) FROM exchanges")
        return Size(exchanges: row?[0] ?? 0, bytes: Int(row?[1] as Double? ?? 0))
    }

    /// Removes the first-stored exchanges while `size` is past either
    /// limit; the newest stays, however big. Costs what it removes, never a
    /// scan of the store (removal follows the rowid and every index's oldest end).
    static func trim(_ db: Database, _ retention: Retention, _ size: Size) throws -> Trimmed {
        var trimmed = Trimmed(size: size, removed: 0, files: [])
        func over() -> Bool { trimmed.size.exchanges > retention.maxExchanges || trimmed.size.bytes > retention.maxBytes }
        var measured = false
        while over() {
            // Over by bytes, a big body may outweigh a thousand small rows:
            // read ahead in large steps (reading is cheap; only what is needed goes).
            let floor = trimmed.size.bytes > retention.maxBytes ? 1_000 : 64
            let want = min(max(trimmed.size.exchanges - retention.maxExchanges, floor), 10_000)
            let rows = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT id, stored_bytes, request_body_file, response_body_file FROM exchanges
                WHERE id < (SELECT max(id) FROM exchanges) ORDER BY id LIMIT ?
                """), arguments: [want])
            if rows.count < want && !measured {
                // Fewer rows than the count says: something else changed the store. Measure, then go on.
                trimmed.size = try Self.size(db)
                measured = true
                continue
            }
            // Only the newest is left.
            guard !rows.isEmpty else { break }
            var last: Int64?
            for row in rows where over() {
                last = row["id"]
                trimmed.size.exchanges -= 1
                trimmed.size.bytes -= row["stored_bytes"] as Int
                trimmed.files += [row["request_body_file"], row["response_body_file"]].compactMap { $0 as String? }
                trimmed.removed += 1
            }
            if let last { try db.cachedStatement(sql: "DELETE FROM exchanges WHERE id <= ?").execute(arguments: [last]) }
        }
        return trimmed
    }

    /// Drops the first-stored exchanges past `retention`, then their body
    /// files (rows first: no reader finds a row whose file is gone for
    /// good). Returns how many exchanges went.
    public func prune(_ retention: Retention) async throws -> Int {
        let trimmed = try await database.pool.write { db in try Self.trim(db, retention, Self.size(db)) }
        BodyStore(paths: database.paths).remove(trimmed.files)
        return trimmed.removed
    }

    /// Removes every stored exchange (the page's "clear capture") and the
    /// body files they name; exchanges in flight are stored as they end.
    /// Ids go on from where they were (AUTOINCREMENT), so a reader's
    /// "after id" marks stay good. Returns how many exchanges went.
    public func clear() throws -> Int {
        let (removed, files) = try database.pool.write { db -> (Int, [String]) in
            let files = try String.fetchAll(db, sql: """
                SELECT request_body_file FROM exchanges WHERE request_body_file IS NOT NULL
                UNION ALL SELECT response_body_file FROM exchanges WHERE response_body_file IS NOT NULL
                """)
            try db.execute(sql: "DELETE FROM exchanges")
            let removed = db.changesCount
            try db.execute(sql: "DELETE FROM host_rows")
            try db.execute(sql: "DELETE FROM hosts")
            return (removed, files)
        }
        BodyStore(paths: database.paths).remove(files)
        return removed
    }

    /// Every body file a row names, for the orphan sweep.
    public func bodyFiles() throws -> Set<String> {
        try database.pool.read { db in
            let names = try String.fetchAll(db, sql: """
                SELECT request_body_file FROM exchanges WHERE request_body_file IS NOT NULL
                UNION ALL SELECT response_body_file FROM exchanges WHERE response_body_file IS NOT NULL
                """)
            return Set(names)
        }
    }
}

extension TrafficRepository {
    /// Rows per device since `since` (the devices list's "today").
    public func exchangesByDevice(since: Date) throws -> [String: Int] {
        try database.pool.read { db in
            let rows = try Row.fetchAll(db, sql: "SELECT device, count(*) AS n FROM exchanges WHERE started_at >= ? AND device IS NOT NULL GROUP BY device",
                                        arguments: [DatabaseDateText.string(since)])
            return Dictionary(rows.compactMap { row in (row["device"] as String?).map { ($0, row["n"] as Int? ?? 0) } }, uniquingKeysWith: +)
        }
    }
}
