import GRDB

/// Rows by host, for filters that name a rare one (`ExchangePage`). An
/// index on `exchanges(host, …)` cost 40 % of the capture rate: each commit
/// changed the last page of every busy host's range. This one is filled in
/// bulk, every `every` rows, in the writer's transaction (each host's last
/// page changes once per fill), so it lags: the rows after its `mark` are
/// read by rowid, as the newest rows of the store. Entries of rows that
/// retention removed are swept in bulk too; until then a join drops them.
enum HostIndex {
    static let every: Int64 = 8_192
    /// At most this many rows per catch-up: an existing store (the v6
    /// migration leaves it all unindexed) is caught up over many commits,
    /// each paying a fraction of a second.
    static let chunk: Int64 = 65_536

    /// The last exchange id the index covers.
    static func mark(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM marks WHERE name = 'host_rows'")) ?? 0
    }

    /// In a write: indexes the rows after the mark once there are `every` of
    /// them, and sweeps removed rows' entries once a quarter of the index is
    /// theirs.
    static func catchUp(_ db: Database, every: Int64 = every, chunk: Int64 = chunk) throws {
        let mark = try mark(db)
        guard let last = try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM exchanges")), last - mark >= every else { return }
        let newest = min(last, mark + chunk)
        try db.cachedStatement(
            sql:
                "INSERT OR IGNORE INTO host_rows (host, started_at, id) SELECT host, started_at, id FROM exchanges WHERE id > ? AND id <= ?"
        )
        .execute(arguments: [mark, newest])
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO hosts (host) SELECT DISTINCT host FROM exchanges WHERE id > ? AND id <= ?")
            .execute(arguments: [mark, newest])
        try set("host_rows", newest, db)
        let oldest = try Int64.fetchOne(db.cachedStatement(sql: "SELECT min(id) FROM exchanges")) ?? newest
        // Retention trims exchanges and DNS rows apart: below the further of
        // its marks only the other kind's newer rows are left (old DNS rows
        // must not hold the sweep back for good).
        let trimmed = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT max(value) FROM marks WHERE name IN ('retention_exchanges', 'retention_dns')"))
        let passed = max(oldest, trimmed ?? 0)
        let swept = try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM marks WHERE name = 'host_rows_swept'")) ?? 0
        if passed - swept >= max(every, (newest - oldest) / 4) { try sweep(below: passed, oldest: oldest, db) }
    }

    /// Drops the entries of rows below `passed` that are gone (all below
    /// `oldest` are), and hosts left with none.
    static func sweep(below passed: Int64, oldest: Int64, _ db: Database) throws {
        try db.execute(
            sql: """
                DELETE FROM host_rows WHERE id < ? AND (id < ? OR NOT EXISTS (SELECT 1 FROM exchanges WHERE exchanges.id = host_rows.id))
                """, arguments: [passed, oldest])
        try db.execute(sql: "DELETE FROM hosts WHERE NOT EXISTS (SELECT 1 FROM host_rows WHERE host_rows.host = hosts.host)")
        try set("host_rows_swept", passed, db)
    }

    private static func set(_ name: String, _ value: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: "INSERT INTO marks (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
            .execute(arguments: [name, value])
    }
}
