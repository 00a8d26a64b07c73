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

    /// The same, suspending instead of blocking (GRDB's writer queue does the work).
    public func save(_ records: [ExchangeRecord]) async throws {
        try await database.pool.write { db in
            for record in records {
                var record = record
                try record.insert(db, onConflict: .ignore)
            }
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

    /// Everything but the newest N.
    static let pruneSQL = """
        DELETE FROM exchanges WHERE id IN (
          SELECT id FROM exchanges ORDER BY started_at DESC, id DESC LIMIT -1 OFFSET ?)
        """

    public func prune(maxExchanges: Int) async throws -> Int {
        try await database.pool.write { db in
            try db.execute(sql: Self.pruneSQL, arguments: [maxExchanges])
            return db.changesCount
        }
    }

    /// Drops the oldest exchanges beyond `maxExchanges`; returns how many went.
    @discardableResult
    public func prune(maxExchanges: Int) throws -> Int {
        try database.pool.write { db in
            try db.execute(sql: Self.pruneSQL, arguments: [maxExchanges])
            return db.changesCount
        }
    }
}
