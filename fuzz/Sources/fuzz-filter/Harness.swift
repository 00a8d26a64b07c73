// The filter language (CaptureFilter.parse, then its SQL over a store): what
// `busymate list`, the web page and its live WebSocket take from anyone
// holding the token, and the onboarding pages share a process with.
//
// Properties:
// - parsing returns a filter or an error at a position inside the text
//   (one past its end at most), never a trap or a stack overflow;
// - a parsed filter nests no deeper, and has no more clauses, than the
//   parser's limits say;
// - its SQL runs in SQLite over a small store: no parser stack overflow,
//   no error but a regular expression stopped for running too long.
@testable import BusymateShared
import FuzzSupport
import Foundation
@testable import CaptureStore

/// One small store for every input, made at the first.
nonisolated(unsafe) private var store: (CaptureDatabase, URL)?

private func database() -> CaptureDatabase? {
    if let store { return store.0 }
    let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("fuzz-filter-\(getpid())")
    try? FileManager.default.createDirectory(at: dir.appendingPathComponent("bodies"), withIntermediateDirectories: true)
    guard let db = try? CaptureDatabase(paths: GroupPaths(root: dir)) else { return nil }
    var row = ExchangeRecord(startedAt: Date(timeIntervalSince1970: 1_800_000_000), scheme: "https", method: "GET", host: "api.example.com",
                             port: 443, path: "/users/9?q=a%20b", url: "https://api.example.com/users/9?q=a%20b", tlsMode: .mitm)
    row.status = 404
    row.requestHeaders = ExchangeRecord.encodeHeaders([("Accept", "*/*")])
    row.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/json")])
    row.responseBody = Data("{\"name\":\"needle\"}".utf8)
    _ = try? TrafficRepository(database: db).insert([row])
    store = (db, dir)
    return db
}

private func depth(_ filter: CaptureFilter) -> Int {
    switch filter {
    case .clause: return 0
    case let .not(inner): return 1 + depth(inner)
    case let .and(l, r), let .or(l, r): return max(depth(l), depth(r))
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let text = String(decoding: input, as: UTF8.self)
        let filter: CaptureFilter
        do {
            filter = try CaptureFilter.parse(text, now: Date(timeIntervalSince1970: 1_800_000_000))
        } catch let error as FilterError {
            Fuzz.check(error.position >= 1 && error.position <= text.count + 1, "error position \(error.position) outside \(text.count) characters: \(error)")
            return
        } catch {
            Fuzz.check(false, "parse threw something other than a FilterError: \(error)")
            return
        }
        Fuzz.check(depth(filter) <= CaptureFilterParser.maxDepth, "a filter nests \(depth(filter)) deep: \(Fuzz.show(text))")
        guard let db = database() else { return }
        do {
            var query = TrafficRepository.Filter()
            query.expression = filter
            query.limit = 5
            _ = try TrafficRepository(database: db).list(query)
        } catch {
            let said = StoreHealth.describe(error)
            Fuzz.check(said.hasPrefix(FilterPatternTimeout.prefix), "the filter's SQL failed: \(said) for \(Fuzz.show(text))")
        }
    }
}
