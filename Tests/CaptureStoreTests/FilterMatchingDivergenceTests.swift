import BusymateShared
import Foundation
import Testing

@testable import CaptureStore

/// Review (helper R): rows on which the in-memory matcher and the store's
/// SQL once selected differently; each failed before its fix.
@Suite struct FilterMatchingDivergenceTests {
    private static func row(_ path: String, _ edit: (inout ExchangeRecord) -> Void) -> ExchangeRecord {
        var r = ExchangeRecord(
            startedAt: CaptureFilterSQLTests.base, scheme: "https", method: "GET", host: "d.example.com", port: 443,
            path: path, url: "https://d.example.com\(path)", tlsMode: .mitm)
        r.status = 200
        r.requestHeaders = ExchangeRecord.encodeHeaders([("Accept", "*/*")])
        r.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "text/plain")])
        edit(&r)
        return r
    }

    /// The paths `text` selects in SQL and in memory, over the suite's store plus `extra`.
    private func both(_ text: String, extra: [ExchangeRecord], now: Date = CaptureFilterSQLTests.base) throws -> (
        sql: [String], memory: [String]
    ) {
        let store = try CaptureFilterSQLTests.Store()
        _ = try store.traffic.insert(extra)
        let filter = try CaptureFilter.parse(text, now: now)
        var query = TrafficRepository.Filter()
        query.expression = filter
        query.limit = 100
        let sql = try store.traffic.list(query).map(\.path).sorted()
        var all = TrafficRepository.Filter()
        all.limit = 100
        let bodies = BodyStore(paths: GroupPaths(root: store.dir))
        let memory = try store.traffic.list(all).filter { try filter.matches(FilterSubject($0, bodies: bodies)) }.map(\.path).sorted()
        return (sql, memory)
    }

    /// `~h` is "any `Name: value` line"; a plain-text pattern with the line's
    /// space (`" 1"`) is in the line, not in the stored JSON, which the SQL
    /// function reads first to skip rows cheaply.
    @Test func aHeaderPatternStartingWithTheLinesSpace() throws {
        let extra = Self.row("/beta") { $0.requestHeaders = ExchangeRecord.encodeHeaders([("X-Beta", "1")]) }
        let got = try both(#"~hq " 1""#, extra: [extra])
        #expect(got.memory == ["/beta"])
        #expect(got.sql == got.memory, "SQL \(got.sql), in memory \(got.memory)")
    }

    /// A gzipped empty body: SQL matches its decoded text (""), memory calls it no body.
    @Test func aBodyThatDecodesToNothing() throws {
        let extra = Self.row("/empty-gz") {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Encoding", "gzip"), ("Content-Type", "text/plain")])
            // gzip.compress(b"", mtime=0)
            $0.responseBody = Data([31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        }
        let got = try both(#"~bs "^$""#, extra: [extra])
        #expect(got.sql == got.memory, "SQL \(got.sql), in memory \(got.memory)")
    }

    /// `~since`: SQL compares the time rounded to the millisecond (the
    /// column's text), memory the exact Date.
    @Test func aTimeWithinTheSameMillisecond() throws {
        let extra = Self.row("/at-base") { _ in }
        // `~since 1s` said 1.0004 s after the row started: the row is 0.4 ms too early, which SQL rounds away.
        let got = try both("~since 1s", extra: [extra], now: CaptureFilterSQLTests.base.addingTimeInterval(1.0004))
        #expect(got.sql == got.memory, "SQL \(got.sql), in memory \(got.memory)")
    }
}
