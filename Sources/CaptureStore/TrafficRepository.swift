import BusymateShared
import Foundation
import GRDB

/// Every read and write of captured exchanges.
public struct TrafficRepository: Sendable {
    public let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    /// One transaction for a batch: the tunnel's writer calls this.
    /// `sockets`: the rows' WebSocket events (a HAR import's), after them.
    public func insert(_ records: [ExchangeRecord], sockets: [WebSocketEvent] = []) throws -> [ExchangeRecord] {
        try database.pool.write { db in
            let inserted = try records.map { record in
                var record = record
                try record.insert(db, onConflict: .ignore)
                return record
            }
            try HostIndex.catchUp(db)
            _ = try WebSocketRepository.apply(sockets, db)
            return inserted
        }
    }

    /// The tunnel writer's commit: the batch (one cached statement bound
    /// directly, no ids read back), then retention in the same
    /// transaction. `size` is what the writer last knew of the store (nil:
    /// measure it once) when the last row was `lastID`: rows stored since by
    /// someone else (a HAR import) have it measured again. The answer
    /// carries the new size and the body files to remove once the
    /// transaction is committed.
    public func save(
        _ records: [ExchangeRecord], sockets: [WebSocketEvent] = [], keeping retention: Retention, size: Size?,
        lastID: Int64? = nil
    ) async throws -> Trimmed {
        try await database.pool.write { db in
            let top = try Self.lastID(db)
            var size = try size.flatMap { lastID == nil || lastID == top ? $0 : nil } ?? Self.size(db)
            try Self.insert(records, db)
            // After the rows: a socket's handshake is stored before its messages.
            let applied = try WebSocketRepository.applyReporting(sockets, db)
            size.bytes += applied.added
            for record in records {
                if record.isDNS {
                    size.dns += 1
                } else {
                    size.exchanges += 1
                    size.bytes += record.storedBytes
                }
            }
            var trimmed = try Self.trim(db, retention, size)
            trimmed.lastID = try Self.lastID(db)
            trimmed.goneSockets = applied.gone
            return trimmed
        }
    }

    static func lastID(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT max(id) FROM exchanges")) ?? 0
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

    /// Those of `ids` whose rows `filter` keeps.
    public func ids(among ids: Set<Int64>, _ filter: Filter) throws -> Set<Int64> {
        guard !ids.isEmpty else { return [] }
        return try database.pool.read { db in
            let conditions = filter.page.conditions.reduce(SQL("id IN \(Array(ids))")) { "\($0) AND (\($1))" }
            return Set(try Int64.fetchAll(db, SQLRequest(literal: "SELECT id FROM exchanges WHERE \(conditions)")))
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

    /// Which of `requestIDs` have a stored row (one lookup each in the unique index).
    public func storedRequestIDs(among requestIDs: [String]) throws -> Set<String> {
        guard !requestIDs.isEmpty else { return [] }
        return try database.pool.read { db in
            Set(try String.fetchAll(db, ExchangeRecord.select(Column("request_id")).filter(requestIDs.contains(Column("request_id")))))
        }
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

    /// How much the store keeps: `capture.max_exchanges` and
    /// `capture.max_bytes` for exchanges, `capture.max_dns_rows` for DNS
    /// rows, each kind trimmed apart (a DNS flood never evicts exchanges).
    public struct Retention: Sendable, Equatable {
        public var maxExchanges: Int
        public var maxBytes: Int
        public var maxDNSRows: Int
        public init(maxExchanges: Int, maxBytes: Int, maxDNSRows: Int = AppSettings().maxDNSRows) {
            self.maxExchanges = maxExchanges
            self.maxBytes = maxBytes
            self.maxDNSRows = maxDNSRows
        }

        public init(_ settings: AppSettings) {
            self.init(maxExchanges: settings.maxExchanges, maxBytes: settings.maxBytes, maxDNSRows: settings.maxDNSRows)
        }
    }

    /// Exchanges and their stored body bytes, and DNS rows: what retention weighs.
    public struct Size: Sendable, Equatable {
        public var exchanges: Int
        public var bytes: Int
        public var dns: Int
        public init(exchanges: Int, bytes: Int, dns: Int = 0) {
            self.exchanges = exchanges
            self.bytes = bytes
            self.dns = dns
        }
    }

    /// What a commit left: the store's size, and what retention took.
    public struct Trimmed: Sendable {
        public var size: Size
        public var removed: Int
        /// Body files of removed exchanges, to delete after the commit.
        public var files: [String]
        /// The last row stored when the commit ended.
        public var lastID: Int64 = 0
        /// Sockets whose events found no row (retention or "clear" took it): their capture stops.
        public var goneSockets: Set<String> = []
    }

    /// One scan: the writer measures once, then counts what it adds and removes.
    static func size(_ db: Database) throws -> Size {
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT total(scheme <> 'dns'), total(CASE WHEN scheme <> 'dns' THEN stored_bytes END), total(scheme = 'dns') FROM exchanges
                """)
        return Size(exchanges: Int(row?[0] as Double? ?? 0), bytes: Int(row?[1] as Double? ?? 0), dns: Int(row?[2] as Double? ?? 0))
    }

    /// The store's size now (one scan).
    public func size() throws -> Size {
        try database.pool.read { db in try Self.size(db) }
    }

    /// Removes the first-stored rows of each kind while `size` is past its
    /// limits: exchanges by count and bytes, DNS rows by count; the newest
    /// of each stays, however big.
    static func trim(_ db: Database, _ retention: Retention, _ size: Size) throws -> Trimmed {
        var trimmed = Trimmed(size: size, removed: 0, files: [])
        try trim(db, .exchanges, retention, &trimmed)
        try trim(db, .dns, retention, &trimmed)
        return trimmed
    }

    enum Kind: String {
        case exchanges, dns
        /// How far retention went: no row of the kind is left at or below it.
        var mark: String { "retention_\(rawValue)" }
        var condition: String { self == .dns ? "scheme = 'dns'" : "scheme <> 'dns'" }
    }

    /// One kind's oldest rows, read on from where retention last stopped
    /// (a mark in `marks`): it costs what it removes and the other kind's
    /// rows it steps over once, never a scan of the store.
    private static func trim(_ db: Database, _ kind: Kind, _ retention: Retention, _ trimmed: inout Trimmed) throws {
        func count() -> Int { kind == .dns ? trimmed.size.dns : trimmed.size.exchanges }
        func over() -> Bool {
            // The newest stays.
            guard count() > 1 else { return false }
            return kind == .dns
                ? trimmed.size.dns > retention.maxDNSRows
                : trimmed.size.exchanges > retention.maxExchanges || trimmed.size.bytes > retention.maxBytes
        }
        var measured = false
        var mark = try Int64.fetchOne(db.cachedStatement(sql: "SELECT value FROM marks WHERE name = ?"), arguments: [kind.mark]) ?? 0
        let start = mark
        while over() {
            // Over by bytes, a big body may outweigh a thousand small rows:
            // read ahead in large steps (reading is cheap; only what is needed goes).
            let limit = kind == .dns ? retention.maxDNSRows : retention.maxExchanges
            let floor = kind == .exchanges && trimmed.size.bytes > retention.maxBytes ? 1_000 : 64
            let want = min(max(count() - limit, floor), 10_000, count() - 1)
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, stored_bytes, request_body_file, response_body_file,
                               (SELECT file FROM websockets WHERE exchange_id = exchanges.id AND closed_at IS NOT NULL) AS messages_file
                        FROM exchanges WHERE id > ? AND \(kind.condition) ORDER BY id LIMIT ?
                        """), arguments: [mark, want])
            if rows.count < want && !measured {
                // Fewer rows than the count says: something else changed the store. Measure, then go on.
                trimmed.size = try Self.size(db)
                measured = true
                continue
            }
            guard !rows.isEmpty else { break }
            var last: Int64?
            for row in rows where over() {
                last = row["id"]
                if kind == .dns {
                    trimmed.size.dns -= 1
                } else {
                    trimmed.size.exchanges -= 1
                    trimmed.size.bytes -= row["stored_bytes"] as Int
                }
                // An open socket's file is still written: the orphan sweep takes it once it is done.
                trimmed.files += [row["request_body_file"], row["response_body_file"], row["messages_file"]].compactMap { $0 as String? }
                trimmed.removed += 1
            }
            guard let last else { break }
            try CloudOutbox.noteDropping(db, after: mark, through: last, where: kind.condition)
            try db.cachedStatement(sql: "DELETE FROM exchanges WHERE id > ? AND id <= ? AND \(kind.condition)").execute(arguments: [
                mark, last,
            ])
            mark = last
        }
        if mark != start {
            try db.cachedStatement(
                sql: "INSERT INTO marks (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value"
            )
            .execute(arguments: [kind.mark, mark])
        }
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
            let files = try String.fetchAll(
                db,
                sql: """
                    SELECT request_body_file FROM exchanges WHERE request_body_file IS NOT NULL
                    UNION ALL SELECT response_body_file FROM exchanges WHERE response_body_file IS NOT NULL
                    UNION ALL SELECT file FROM websockets WHERE closed_at IS NOT NULL
                    """)
            // "Clear" drops what a sink has not sent too: counted, as retention's.
            try CloudOutbox.noteDropping(db, after: 0, through: Int64.max, where: "1")
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
            let names = try String.fetchAll(
                db,
                sql: """
                    SELECT request_body_file FROM exchanges WHERE request_body_file IS NOT NULL
                    UNION ALL SELECT response_body_file FROM exchanges WHERE response_body_file IS NOT NULL
                    UNION ALL SELECT file FROM websockets
                    """)
            return Set(names)
        }
    }
}

extension TrafficRepository {
    /// Rows per device since `since` (the devices list's "today").
    public func exchangesByDevice(since: Date) throws -> [String: Int] {
        try database.pool.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT device, count(*) AS n FROM exchanges WHERE started_at >= ? AND device IS NOT NULL GROUP BY device",
                arguments: [DatabaseDateText.string(since)])
            return Dictionary(
                rows.compactMap { row in (row["device"] as String?).map { ($0, row["n"] as Int? ?? 0) } }, uniquingKeysWith: +)
        }
    }
}
