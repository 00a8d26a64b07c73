import BusymateShared
import Foundation
import GRDB
import Testing

@testable import CaptureStore

/// `list`'s plan (time index window, hosts table, `HostIndex`) gives the
/// rows a plain newest-first query gives, page after page, whichever step
/// answers. The window is small here, and the index covers all but the
/// newest 500 rows, so that every step is taken.
@Suite struct ExchangePageTests {
    final class Store {
        let dir = URL(fileURLWithPath: "/tmp/bmp-\(UInt32.random(in: 0...UInt32.max))")
        let database: CaptureDatabase
        var traffic: TrafficRepository { TrafficRepository(database: database) }

        init() throws {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            database = try CaptureDatabase(paths: GroupPaths(root: dir))
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            var rows: [ExchangeRecord] = []
            for i in 0..<3_000 {
                // A host only in the oldest rows, a rare one, and busy ones;
                // starts that tie (several rows a second) and that go back in
                // time now and then (rows are stored as exchanges end).
                let host = i < 40 ? "old.example.org" : i % 97 == 0 ? "rare.example.net" : "api\(i % 5).example.com"
                // One of the newest rows is an exchange that began first and ended last.
                let start = i == 2_990 ? base.addingTimeInterval(-60) : base.addingTimeInterval(Double(i / 3) - (i % 11 == 0 ? 2 : 0))
                var r = ExchangeRecord(
                    startedAt: start, scheme: "https", method: i % 4 == 0 ? "POST" : "GET", host: host, port: 443,
                    path: "/items/\(i)", url: "https://\(host)/items/\(i)", tlsMode: .mitm)
                r.status = i % 7 == 0 ? 404 : 200
                r.responseBody = Data("item \(i)\(i == 120 ? " needle" : "")".utf8)
                rows.append(r)
            }
            _ = try traffic.insert(Array(rows[..<2_500]))
            try database.pool.write { db in try HostIndex.catchUp(db, every: 1) }
            _ = try traffic.insert(Array(rows[2_500...]))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }

        /// The answer without a plan: every match, newest first.
        func plain(_ filter: CaptureFilter?, before: Int64?, limit: Int) throws -> [Int64] {
            try database.pool.read { db in
                var sql: SQL = "SELECT id FROM exchanges NOT INDEXED WHERE \(filter?.sql ?? "1")"
                if let before { sql = "\(sql) AND (started_at, id) < (SELECT started_at, id FROM exchanges WHERE id = \(before))" }
                return try Int64.fetchAll(db, SQLRequest(literal: "\(sql) ORDER BY started_at DESC, id DESC LIMIT \(limit)"))
            }
        }

        func planned(_ filter: CaptureFilter?, before: Int64?, limit: Int, hostGlob: String? = nil) throws -> [Int64] {
            var selection = TrafficRepository.Filter()
            selection.expression = filter
            selection.before = before
            selection.limit = limit
            selection.hostGlob = hostGlob
            var page = selection.page
            page.window = 100
            return try database.pool.read { db in try page.fetch(db).compactMap(\.id) }
        }
    }

    @Test(arguments: [
        "~d rare", "~d old", "~d example", "!~d api1", "~d api1 | ~d rare", "~d api | ~c 404", "~d api2 & ~c 404",
        "~d rare & ~m post", "~d nowhere", "~d old | ~d rare", "(~d api1 | ~d old) & ~c 404", "~b needle", "~d api & ~b needle",
        "~c 404 & ~m post", "~all",
    ])
    func everyPageMatchesAPlainQuery(_ text: String) throws {
        let store = try Store()
        let filter = try CaptureFilter.parse(text)
        for limit in [1, 7, 300] {
            var before: Int64?
            var pages = 0
            repeat {
                let expected = try store.plain(filter, before: before, limit: limit)
                let got = try store.planned(filter, before: before, limit: limit)
                #expect(got == expected, "\(text), limit \(limit), before \(before.map(String.init) ?? "none")")
                guard got == expected, let last = got.last, got.count == limit else { break }
                before = last
                pages += 1
            } while pages < 12
        }
    }

    @Test func anUnindexedStoreIsIndexedAChunkAtATimeAndAnswersMeanwhile() throws {
        let store = try Store()
        // As the v6 migration leaves an existing store: nothing indexed.
        try store.database.pool.write { db in
            try db.execute(sql: "DELETE FROM host_rows; DELETE FROM hosts; DELETE FROM marks")
        }
        let filter = try CaptureFilter.parse("~d rare | ~d old")
        let expected = try store.plain(filter, before: nil, limit: 300)
        #expect(try store.planned(filter, before: nil, limit: 300) == expected)
        try store.database.pool.write { db in try HostIndex.catchUp(db, every: 1, chunk: 1_000) }
        #expect(try store.database.pool.read { db in try HostIndex.mark(db) } == 1_000)
        #expect(try store.planned(filter, before: nil, limit: 300) == expected)
        try store.database.pool.write { db in
            for _ in 0..<3 { try HostIndex.catchUp(db, every: 1, chunk: 1_000) }
        }
        #expect(try store.database.pool.read { db in try HostIndex.mark(db) } == 3_000)
        #expect(try store.planned(filter, before: nil, limit: 300) == expected)
    }

    @Test func aFilterMatchingVeryManyHostsStillAnswers() throws {
        let store = try Store()
        // 2,000 more hosts, each in one row: `~d many` matches more than the plan names (it walks the time index then).
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        _ = try store.traffic.insert(
            (0..<2_000).map { i in
                ExchangeRecord(
                    startedAt: base.addingTimeInterval(Double(-i)), scheme: "http", method: "GET", host: "h\(i).many.example", port: 80,
                    path: "/", url: "http://h\(i).many.example/", tlsMode: .none)
            })
        try store.database.pool.write { db in try HostIndex.catchUp(db, every: 1) }
        let filter = try CaptureFilter.parse("~d many")
        let expected = try store.plain(filter, before: nil, limit: 50)
        #expect(expected.count == 50)
        #expect(try store.planned(filter, before: nil, limit: 50) == expected)
    }

    @Test func theHostShorthandTakesTheSamePlan() throws {
        let store = try Store()
        let expected = try store.plain(try CaptureFilter.parse(#"~d ^rare\.example\.net$"#), before: nil, limit: 50)
        #expect(expected.count == 30)
        #expect(try store.planned(nil, before: nil, limit: 50, hostGlob: "rare.*") == expected)
    }

    @Test func retentionForgetsAHostWhoseRowsWent() async throws {
        let store = try Store()
        func hosts() throws -> [String] {
            try store.database.pool.read { db in try String.fetchAll(db, sql: "SELECT host FROM hosts ORDER BY host") }
        }
        #expect(
            try hosts() == [
                "api0.example.com", "api1.example.com", "api2.example.com", "api3.example.com", "api4.example.com",
                "old.example.org", "rare.example.net",
            ])
        // The 40 oldest rows are the old host's. The index sweeps what
        // retention removed once enough has gone (here: now).
        _ = try await store.traffic.prune(.init(maxExchanges: 2_000, maxBytes: .max))
        #expect(try store.planned(try CaptureFilter.parse("~d old"), before: nil, limit: 50).isEmpty)
        try await store.database.pool.write { db in try HostIndex.catchUp(db, every: 1) }
        #expect(
            try hosts() == [
                "api0.example.com", "api1.example.com", "api2.example.com", "api3.example.com", "api4.example.com",
                "rare.example.net",
            ])
        #expect(try store.planned(try CaptureFilter.parse("~d old"), before: nil, limit: 50).isEmpty)
    }
}
