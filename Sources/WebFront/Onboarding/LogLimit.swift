import Synchronization

/// At most one log line per interval and key, with a count of those left
/// unsaid: the onboarding listener asks no token, so no client may flood
/// the journal, while different refusals (per device, per reason) are
/// each still said.
final class LogLimit: Sendable {
    private struct Entry {
        var lastAt = -Double.infinity
        var unsaid = 0
    }

    private let state = Mutex([String: Entry]())
    let interval: Double
    /// Keys kept at most (names come from settings, but stay bounded).
    static let maxKeys = 1_024

    init(interval: Double = 10) { self.interval = interval }

    /// Nil: stay quiet; else how many went unsaid since the last line.
    func allow(_ key: String = "", now: Double) -> Int? {
        state.withLock { entries in
            if entries[key] == nil, entries.count >= Self.maxKeys { entries = entries.filter { now - $0.value.lastAt < interval } }
            var entry = entries[key] ?? Entry()
            defer { entries[key] = entry }
            guard now - entry.lastAt >= interval else {
                entry.unsaid += 1
                return nil
            }
            let unsaid = entry.unsaid
            entry.lastAt = now
            entry.unsaid = 0
            return unsaid
        }
    }
}
