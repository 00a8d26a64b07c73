import BusymateShared
import CaptureStore
import Foundation
import Synchronization

/// The exchanges between their request head and their row, in memory: two
/// dictionary operations under a lock per exchange, and a snapshot for
/// `open-exchanges.json` when something changed.
public final class OpenExchanges: Sendable {
    private struct Table {
        var entries: [String: OpenExchangesFile.Entry] = [:]
        var changes = 0
    }

    private let table = Mutex(Table())
    /// Beyond this many open at once, new ones are neither listed nor counted.
    static let capacity = 50_000

    public init() {}

    public func opened(_ entry: OpenExchangesFile.Entry) {
        table.withLock { t in
            guard t.entries.count < Self.capacity else { return }
            t.entries[entry.requestID] = entry
            t.changes &+= 1
        }
    }

    public func closed(_ requestID: String) {
        table.withLock { t in
            if t.entries.removeValue(forKey: requestID) != nil { t.changes &+= 1 }
        }
    }

    /// The request ids open now (the body files they may be writing).
    public func requestIDs() -> Set<String> {
        table.withLock { Set($0.entries.keys) }
    }

    /// The open exchanges, oldest first (the first `OpenExchangesFile.limit`),
    /// when anything changed since `since`; and the change count to pass next time.
    public func snapshot(since: Int?) -> (changes: Int, file: OpenExchangesFile?) {
        let (changes, all) = table.withLock { t -> (Int, [OpenExchangesFile.Entry]?) in
            t.changes == since ? (t.changes, nil) : (t.changes, Array(t.entries.values))
        }
        guard let all else { return (changes, nil) }
        let oldest = all.sorted { $0.startedAt < $1.startedAt }.prefix(OpenExchangesFile.limit)
        return (changes, OpenExchangesFile(pid: getpid(), count: all.count, entries: Array(oldest)))
    }
}
