import BusymateShared
import Foundation
import Testing

@testable import CaptureStore

/// The in-memory matcher (what rules use on a live exchange) selects the
/// same exchanges as the store's SQL, over the rows `CaptureFilterSQLTests` builds.
@Suite struct FilterMatchingTests {
    private func inMemory(_ text: String, _ store: CaptureFilterSQLTests.Store) throws -> [String] {
        let filter = try CaptureFilter.parse(text, now: CaptureFilterSQLTests.base)
        var all = TrafficRepository.Filter()
        all.limit = 100
        let bodies = BodyStore(paths: GroupPaths(root: store.dir))
        return try store.traffic.list(all).reversed().filter { try filter.matches(FilterSubject($0, bodies: bodies)) }.map(\.path)
    }

    @Test func everyClauseSelectsTheRowsItsSQLSelects() throws {
        let store = try CaptureFilterSQLTests.Store()
        for (filter, expected) in CaptureFilterSQLTests.cases {
            let got = try inMemory(filter, store)
            #expect(got == expected, "\(filter): \(got)")
        }
    }

    @Test func combinationsAgreeWithSQL() throws {
        let store = try CaptureFilterSQLTests.Store()
        let filters = CaptureFilterSQLTests.cases.map(\.0)
        for (i, a) in filters.enumerated() {
            let b = filters[(i * 7 + 3) % filters.count]
            for text in ["(\(a)) & (\(b))", "(\(a)) | !(\(b))", "!(\(a)) (\(b))"] {
                let sql = try store.paths(text)
                let memory = try inMemory(text, store)
                #expect(sql == memory, "\(text): SQL \(sql), in memory \(memory)")
            }
        }
    }

    @Test func aGzippedBodyMatchesDecodedAsInSQL() throws {
        let store = try CaptureFilterSQLTests.Store()
        var row = ExchangeRecord(
            startedAt: CaptureFilterSQLTests.base, scheme: "https", method: "GET", host: "gz.example.com", port: 443,
            path: "/gz", url: "https://gz.example.com/gz", tlsMode: .mitm)
        row.status = 200
        row.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Encoding", "gzip"), ("Content-Type", "text/plain")])
        // "hello gzip-word" gzipped (RFC 1952), made by Python's gzip.compress with mtime 0.
        row.responseBody = Data([
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57, 0x48, 0xaf,
            0xca, 0x2c, 0xd0, 0x2d, 0xcf, 0x2f, 0x4a, 0x01, 0x00, 0xbf, 0x6c, 0x00, 0xac, 0x0f, 0x00, 0x00, 0x00,
        ])
        _ = try store.traffic.insert([row])
        #expect(try store.paths("~bs gzip-word") == ["/gz"])
        #expect(try inMemory("~bs gzip-word", store) == ["/gz"])
    }

    /// Found by fuzz-filter: `~until 0.0005s` selected a row of this very
    /// millisecond in SQL (the store keeps whole milliseconds), not in memory.
    @Test func timesCountInWholeMillisecondsAsInSQL() throws {
        let store = try CaptureFilterSQLTests.Store()
        for (path, seconds) in [("/now", 0.0), ("/a-millisecond-ago", -0.001)] {
            let row = ExchangeRecord(
                startedAt: CaptureFilterSQLTests.base.addingTimeInterval(seconds), scheme: "https", method: "GET",
                host: "ms.example.com", port: 443, path: path, url: "https://ms.example.com\(path)", tlsMode: .mitm)
            _ = try store.traffic.insert([row])
        }
        for text in ["~until 0.0005s", "~since 0.0006s", "~until 0.0004s", "!~until 0.0005s & ~d ^ms\\."] {
            #expect(try inMemory(text, store) == store.paths(text), "\(text)")
        }
        #expect(try inMemory("~until 0.0005s & ~d ^ms\\.", store) == ["/a-millisecond-ago", "/now"])
    }

    /// SQLite's lower() folds ASCII only; Swift's lowercased() folds the
    /// Kelvin sign (U+212A) to k: a server's `Upgrade: WEBSOC\u{212A}ET`
    /// was a WebSocket to a rule and not in the list.
    @Test func websocketReadsTheUpgradeHeaderAsSQLDoes() throws {
        let store = try CaptureFilterSQLTests.Store()
        var row = ExchangeRecord(
            startedAt: CaptureFilterSQLTests.base, scheme: "https", method: "GET", host: "ws.example.com", port: 443,
            path: "/kelvin", url: "https://ws.example.com/kelvin", tlsMode: .mitm)
        row.status = 101
        row.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "WEBSOC\u{212A}ET")])
        _ = try store.traffic.insert([row])
        #expect(try inMemory("~websocket", store) == store.paths("~websocket"))
        #expect(try inMemory("~websocket", store) == ["/ws"])
    }

    @Test func aBacktrackingPatternIsStoppedInMemoryToo() throws {
        let filter = try CaptureFilter.parse("~u \"(a+)+b\"")
        var subject = FilterSubject(url: "https://x.test/" + String(repeating: "a", count: 40))
        subject.host = "x.test"
        #expect(throws: FilterPatternTimeout.self) { try filter.matches(subject, within: .milliseconds(20)) }
    }
}
