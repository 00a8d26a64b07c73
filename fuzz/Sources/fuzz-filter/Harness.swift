import Foundation
import FuzzSupport

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
//   no error but a regular expression stopped for running too long;
// - the rows its SQL selects are exactly the rows the in-memory matcher
//   (`CaptureFilter.matches`, what rules decide with) selects, each row read
//   as `FilterSubject(record, bodies:)` (unless a regular expression ran
//   too long on either side). The store (FilterStore) has rows for every
//   clause to select and to refuse.
@testable import BusymateShared
@testable import CaptureStore

/// The store, made at the first input (nil inside when it could not be).
nonisolated(unsafe) private var made: FilterStore??

private func store() -> FilterStore? {
    if let made { return made }
    let store = try? FilterStore()
    made = .some(store)
    return store
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
            Fuzz.check(
                error.position >= 1 && error.position <= text.count + 1,
                "error position \(error.position) outside \(text.count) characters: \(error)")
            return
        } catch {
            Fuzz.check(false, "parse threw something other than a FilterError: \(error)")
            return
        }
        Fuzz.check(depth(filter) <= CaptureFilterParser.maxDepth, "a filter nests \(depth(filter)) deep: \(Fuzz.show(text))")
        guard let store = store() else {
            Fuzz.check(false, "cannot make the harness's store")
            return
        }
        let sql: Set<Int64>
        do {
            var query = TrafficRepository.Filter()
            query.expression = filter
            query.limit = 1000
            sql = Set(try TrafficRepository(database: store.database).list(query).compactMap(\.id))
        } catch {
            let said = StoreHealth.describe(error)
            Fuzz.check(said.hasPrefix(FilterPatternTimeout.prefix), "the filter's SQL failed: \(said) for \(Fuzz.show(text))")
            return
        }
        var memory = Set<Int64>()
        for (id, subject) in store.subjects {
            do {
                if try filter.matches(subject) { memory.insert(id) }
            } catch {
                return
            }
        }
        guard sql != memory else { return }
        let paths = { (ids: Set<Int64>) in store.subjects.filter { ids.contains($0.id) }.map { "\($0.subject.method) \($0.subject.url)" } }
        Fuzz.check(
            false,
            "\(Fuzz.show(text)) selects in SQL only \(paths(sql.subtracting(memory))), in memory only \(paths(memory.subtracting(sql)))")
    }
}
