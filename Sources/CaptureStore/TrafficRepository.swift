import Foundation
import GRDB

/// Every read and write of captured exchanges.
public struct TrafficRepository: Sendable {
    let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    /// One transaction for a batch: the tunnel's writer calls this.
    public func insert(_ records: [ExchangeRecord]) throws -> [ExchangeRecord] {
        try database.pool.write { db in
            try records.map { record in
                var record = record
                try record.insert(db, onConflict: .ignore)
                return record
            }
        }
    }

    /// The tunnel's writer: one transaction, one cached statement, and no
    /// ids read back (nobody needs them), suspending instead of blocking.
    public func save(_ records: [ExchangeRecord]) async throws {
        try await database.pool.write { db in
            let statement = try db.cachedStatement(sql: ExchangeRecord.insertSQL)
            for record in records { try statement.execute(arguments: record.insertArguments) }
        }
    }

    public struct Filter: Sendable {
        public var hostGlob: String?
        public var method: String?
        /// Inclusive status range (`4xx` → 400...499).
        public var status: ClosedRange<Int>?
        public var since: Date?
        public var search: String?
        public var limit: Int = 50
        public init() {}
    }

    /// Newest first.
    public func list(_ filter: Filter) throws -> [ExchangeRecord] {
        try database.pool.read { db in
            var request = ExchangeRecord.all()
            if let glob = filter.hostGlob { request = request.filter(sql: "host GLOB ?", arguments: [glob.lowercased()]) }
            if let method = filter.method { request = request.filter(Column("method") == method.uppercased()) }
            if let status = filter.status { request = request.filter(status.contains(Column("status"))) }
            if let since = filter.since { request = request.filter(Column("started_at") >= since) }
            if let search = filter.search {
                request = request.filter(sql: "(instr(url, ?) > 0 OR instr(request_headers, ?) > 0 OR instr(ifnull(response_headers, ''), ?) > 0)",
                                         arguments: [search, search, search])
            }
            return try request.order(Column("started_at").desc, Column("id").desc).limit(filter.limit).fetchAll(db)
        }
    }

    public func find(id: Int64) throws -> ExchangeRecord? {
        try database.pool.read { db in try ExchangeRecord.fetchOne(db, key: id) }
    }

    public func find(requestID: String) throws -> ExchangeRecord? {
        try database.pool.read { db in try ExchangeRecord.filter(Column("request_id") == requestID).fetchOne(db) }
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

    /// The oldest rows past either limit, counting from the newest: the
    /// running count and the running sum of stored body bytes decide. The
    /// newest exchange stays, however big.
    static let victimsSQL = """
        SELECT id, request_body_file, response_body_file FROM (
          SELECT id, request_body_file, response_body_file,
                 ROW_NUMBER() OVER newest AS n, SUM(stored_bytes) OVER newest AS kept
          FROM exchanges
          WINDOW newest AS (ORDER BY started_at DESC, id DESC ROWS UNBOUNDED PRECEDING))
        WHERE n > 1 AND (n > ? OR kept > ?)
        """

    private static func prune(_ db: Database, _ retention: Retention) throws -> (removed: Int, files: [String]) {
        let rows = try Row.fetchAll(db, sql: victimsSQL, arguments: [retention.maxExchanges, retention.maxBytes])
        let ids: [Int64] = rows.map { $0["id"] }
        let files = rows.flatMap { row -> [String] in [row["request_body_file"], row["response_body_file"]].compactMap { $0 } }
        var start = 0
        while start < ids.count {
            let chunk = Array(ids[start..<min(start + 10_000, ids.count)])
            _ = try ExchangeRecord.deleteAll(db, keys: chunk)
            start += chunk.count
        }
        return (ids.count, files)
    }

    /// Drops the oldest exchanges past `retention`, then their body files
    /// (rows first: no reader finds a row whose file is gone for good).
    /// Returns how many exchanges went.
    public func prune(_ retention: Retention) async throws -> Int {
        let result = try await database.pool.write { db in try Self.prune(db, retention) }
        BodyStore(paths: database.paths).remove(result.files)
        return result.removed
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
