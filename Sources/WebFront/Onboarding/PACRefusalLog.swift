import Logging
import Synchronization

/// The warning for a refused PAC, at most once per interval with a count of
/// the ones between: the onboarding listener asks no token and phones
/// fetch their PAC often, so a client must not be able to flood the journal.
final class PACRefusalLog: Sendable {
    private struct State {
        var lastAt = -Double.infinity
        var unsaid = 0
    }

    private let state = Mutex(State())
    private let logger = Logger(label: "busymate.web.onboarding")
    static let interval = 10.0

    func refused(client: String?, reason: String, now: Double) {
        let said = state.withLock { s -> Int? in
            guard now - s.lastAt >= Self.interval else {
                s.unsaid += 1
                return nil
            }
            defer { s.lastAt = now; s.unsaid = 0 }
            return s.unsaid
        }
        guard let earlier = said else { return }
        logger.warning("a PAC was refused", metadata: ["CLIENT": "\(client ?? "?")", "REASON": "\(reason)", "UNSAID": "\(earlier)"])
    }
}
