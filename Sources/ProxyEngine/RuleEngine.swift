import BusymateShared
import Synchronization

/// `settings.json`'s rules as the data path reads them: replaced whole on
/// every settings change, consulted once per request and kind. With no
/// rules the check is one atomic load.
public final class RuleEngine: Sendable {
    private let rules = Mutex<[Rule]>([])
    private let any = Atomic<Bool>(false)

    public init() {}

    public func apply(_ settings: AppSettings) {
        let enabled = settings.rules.filter(\.enabled)
        rules.withLock { $0 = enabled }
        any.store(!enabled.isEmpty, ordering: .relaxed)
    }

    /// No enabled rules: the data path skips building a URL to match.
    var isEmpty: Bool { !any.load(ordering: .relaxed) }

    /// The first enabled rule of `kind` whose pattern matches `url`.
    func first(_ kind: Rule.Kind, for url: String) -> Rule? {
        guard any.load(ordering: .relaxed) else { return nil }
        return rules.withLock { $0.first { $0.kind == kind && $0.pattern.matches(url) } }
    }
}
