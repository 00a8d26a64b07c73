import Foundation
import GRDB

/// How a page of `list` is read, newest first, without leaving the choice
/// of index to SQLite (it chose a host index and sorted every match).
///
/// A filter that names no host walks the time index as far as it must: one
/// that matches one row in a thousand fills a page within 50,000 rows. One
/// that names hosts (`~d`, `--host`) has its host clauses matched against
/// the `hosts` table first; then
/// - the rows `HostIndex` does not cover yet (the newest) are read by rowid;
/// - when the hosts have fewer than `window` rows, those rows are read
///   through `host_rows`: a rare host costs its own rows, not the store;
/// - otherwise the newest `window` rows are walked through the time index,
///   and only past them are the hosts' rows read through `host_rows`.
struct ExchangePage {
    /// Conditions on `exchanges`, and-ed.
    var conditions: [SQL]
    /// Only rows before this one's place in the order (the next page).
    var before: Int64?
    /// A condition on `hosts.host` implied by `conditions`, if the filter has one.
    var hosts: SQL?
    var limit: Int
    var window = 20_000

    static let order = "ORDER BY started_at DESC, id DESC"
    /// Past this many matching hosts, the host plan is not used.
    static let maxHosts = 500

    func fetch(_ db: Database) throws -> [ExchangeRecord] {
        guard limit > 0 else { return [] }
        let cursor: SQL = before.map { "(started_at, id) < (SELECT started_at, id FROM exchanges WHERE id = \($0))" } ?? "1"
        let filter: SQL = conditions.reduce(cursor) { "\($0) AND (\($1))" }
        guard let hosts else { return try page(db, "exchanges INDEXED BY exchanges_started", filter, limit) }
        let mark = try HostIndex.mark(db)
        // By rowid (through the time index SQLite walked the whole store to
        // find them), sorting ids, not whole rows.
        let tail: SQL = "SELECT id FROM exchanges NOT INDEXED WHERE id > \(mark) AND \(filter) \(sql: Self.order) LIMIT \(limit)"
        let newest = try page(db, "exchanges NOT INDEXED", "id IN (\(tail))", limit)
        let names = try String.fetchAll(db, SQLRequest(literal: "SELECT host FROM hosts WHERE \(hosts) LIMIT \(Self.maxHosts + 1)"))
        guard !names.isEmpty else { return newest }
        // So many hosts that the filter hardly narrows anything (and naming
        // them all would make one statement of thousands of values): the
        // time index it is.
        guard names.count <= Self.maxHosts else { return try page(db, "exchanges INDEXED BY exchanges_started", filter, limit) }
        // `host IN` first: SQLite's own comparison turns most rows away before a filter function runs.
        let covered: SQL = "host IN \(names) AND id <= \(mark) AND \(filter)"
        let entries: SQL = "SELECT count(*) FROM (SELECT 1 FROM host_rows WHERE host IN \(names) AND id <= \(mark) LIMIT \(window))"
        var older: [ExchangeRecord]
        if try Int.fetchOne(db, SQLRequest(literal: entries)) ?? 0 < window {
            older = try byHost(db, names, covered, before: nil, limit)
        } else {
            let far: SQL =
                "SELECT started_at FROM exchanges INDEXED BY exchanges_started WHERE \(cursor) \(sql: Self.order) LIMIT 1 OFFSET \(window - 1)"
            guard let edge = try String.fetchOne(db, SQLRequest(literal: far)) else {
                return try page(db, "exchanges INDEXED BY exchanges_started", filter, limit)
            }
            older = try page(db, "exchanges INDEXED BY exchanges_started", "\(covered) AND started_at >= \(edge)", limit)
            if older.count < limit { older += try byHost(db, names, covered, before: edge, limit - older.count) }
        }
        // Two runs, each newest first, of different rows.
        return (newest + older).sorted { ($0.startedAt, $0.id ?? 0) > ($1.startedAt, $1.id ?? 0) }.prefix(limit).map { $0 }
    }

    private func page(_ db: Database, _ source: String, _ filter: SQL, _ limit: Int) throws -> [ExchangeRecord] {
        let query: SQL = "SELECT * FROM \(sql: source) WHERE \(filter) \(sql: Self.order) LIMIT \(limit)"
        return try ExchangeRecord.fetchAll(db, SQLRequest(literal: query))
    }

    /// The rows of `names` through `host_rows` (started before `edge`, when
    /// given), in order from the index alone.
    private func byHost(_ db: Database, _ names: [String], _ filter: SQL, before edge: String?, _ limit: Int) throws -> [ExchangeRecord] {
        let range: SQL = edge.map { "AND started_at < \($0)" } ?? ""
        let cursor: SQL = before.map { "AND (started_at, id) < (SELECT started_at, id FROM exchanges WHERE id = \($0))" } ?? ""
        return try inOrder(db, "SELECT id FROM host_rows WHERE host IN \(names) \(range) \(cursor) \(sql: Self.order)", filter, limit)
    }

    /// The rows `ids` lists, in its order, that match `filter`: read in
    /// growing chunks until a page is full. SQLite's own plan sorted whole
    /// rows (0.3 s for a host with 20,000).
    private func inOrder(_ db: Database, _ ids: SQL, _ filter: SQL, _ limit: Int) throws -> [ExchangeRecord] {
        let ids = try Int64.fetchCursor(db, SQLRequest(literal: ids))
        var found: [ExchangeRecord] = []
        var chunk: [Int64] = []
        var size = 64
        func flush() throws {
            guard !chunk.isEmpty else { return }
            let rows: SQL = "SELECT * FROM exchanges NOT INDEXED WHERE id IN \(chunk) AND \(filter) \(sql: Self.order)"
            found += try ExchangeRecord.fetchAll(db, SQLRequest(literal: rows))
            chunk.removeAll(keepingCapacity: true)
            size = min(size * 4, 4_096)
        }
        while found.count < limit, let id = try ids.next() {
            chunk.append(id)
            if chunk.count == size { try flush() }
        }
        if found.count < limit { try flush() }
        return Array(found.prefix(limit))
    }
}
