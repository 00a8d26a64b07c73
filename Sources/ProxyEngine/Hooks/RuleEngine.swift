import BusymateShared
import Logging
import Synchronization

/// `settings.json`'s rules as the data path reads them: replaced whole on
/// every settings change, consulted once per request and kind. With no
/// rules the check is one atomic load; with URL patterns alone, no
/// request is described beyond its URL.
public final class RuleEngine: Sendable {
    /// The enabled rules and what they need, replaced together.
    struct Snapshot: Sendable {
        var rules: [Rule] = []
        /// Some rule matches with a filter: requests are described whole (`FilterSubject`).
        var usesFilters = false
        /// Some headers rule's filter may read the response: its response
        /// edits are chosen again when the response comes.
        var choosesAtResponse = false
    }

    private let current = Mutex(Snapshot())
    private let any = Atomic<Bool>(false)

    public init() {}

    public func apply(_ settings: AppSettings) {
        let enabled = settings.rules.filter(\.enabled)
        let next = Snapshot(
            rules: enabled, usesFilters: enabled.contains { $0.match.isFilter },
            choosesAtResponse: enabled.contains { $0.kind == .headers && $0.match.readsResponse })
        let before = current.withLock { snapshot in
            defer { snapshot = next }
            return snapshot.rules.map(\.name)
        }
        any.store(!enabled.isEmpty, ordering: .relaxed)
        let names = enabled.map(\.name)
        guard names != before else { return }
        let disabled = settings.rules.count - enabled.count
        Logger(label: "busymate.rules").info(
            "\(enabled.count) rule\(enabled.count == 1 ? "" : "s") in force\(disabled > 0 ? " (\(disabled) disabled)" : "")",
            metadata: ["RULES": "\(names.joined(separator: ", "))"])
    }

    /// No enabled rules: the data path skips building a URL to match.
    var isEmpty: Bool { !any.load(ordering: .relaxed) }

    /// The rules in force now; matched outside the lock (a filter may take
    /// its whole budget, and other loops must not wait for it).
    var snapshot: Snapshot { current.withLock { $0 } }

    /// The first enabled rule of `kind` that matches `url` (a URL pattern)
    /// or `exchange` (a filter; none without it).
    func first(_ kind: Rule.Kind, for url: String, exchange: FilterSubject?) -> Rule? {
        guard !isEmpty else { return nil }
        return snapshot.firstOfEachKind(for: url, exchange: exchange, only: kind).found[kind]
    }

    func plan(for url: String, exchange: FilterSubject?, responseLater: Bool = false) -> RulePlan {
        guard !isEmpty else { return RulePlan() }
        return snapshot.plan(for: url, exchange: exchange, responseLater: responseLater)
    }

    func responseRule(for exchange: FilterSubject) -> (rule: Rule?, timedOut: [String]) {
        snapshot.responseRule(for: exchange)
    }
}

extension RuleEngine.Snapshot {
    /// The first enabled rule of each kind (or of `only`) that matches: one
    /// pass, the URL taken apart once, every filter within one budget. The
    /// filters that ran out of it count as no match, and are named.
    func firstOfEachKind(for url: String, exchange: FilterSubject?, only: Rule.Kind? = nil) -> (
        found: [Rule.Kind: Rule], timedOut: [String]
    ) {
        let subject = URLPattern.Subject(url)
        let deadline = exchange == nil ? ContinuousClock.Instant.now : ContinuousClock.now.advanced(by: RuleMatch.timeLimit)
        var found: [Rule.Kind: Rule] = [:]
        var timedOut: [String] = []
        for rule in rules where found[rule.kind] == nil && (only == nil || rule.kind == only) {
            switch rule.match.matches(url: subject, exchange: exchange, until: deadline) {
            case true?: found[rule.kind] = rule
            case false?: break
            case nil: timedOut.append(rule.name)
            }
        }
        return (found, timedOut)
    }

    /// With `responseLater`, a headers rule's response edits are left to
    /// `responseRule` (its filter may read the response).
    func plan(for url: String, exchange: FilterSubject?, responseLater: Bool) -> RulePlan {
        var plan = RulePlan()
        let (first, timedOut) = firstOfEachKind(for: url, exchange: exchange)
        plan.timedOut = timedOut
        plan.block = first[.block]
        guard plan.block == nil else { return plan }
        plan.mapLocal = first[.mapLocal]
        if plan.mapLocal == nil, let rule = first[.mapRemote] {
            plan.mapRemote = rule
            plan.applied.append(rule.name)
        }
        if plan.mapLocal == nil, let rule = first[.hostOverride], case let .hostOverride(address) = rule.action {
            plan.hostOverride = address
            plan.applied.append(rule.name)
        }
        if let rule = first[.headers], case let .headers(request, response) = rule.action {
            plan.requestEdits = request.isEmpty ? nil : request
            plan.responseEdits = response.isEmpty || responseLater ? nil : response
            if plan.requestEdits != nil || plan.responseEdits != nil { plan.applied.append(rule.name) }
        }
        return plan
    }

    /// The headers rule whose response edits apply to `exchange`, its
    /// response come: the first enabled headers rule that matches it now.
    func responseRule(for exchange: FilterSubject) -> (rule: Rule?, timedOut: [String]) {
        let (found, timedOut) = firstOfEachKind(for: exchange.url, exchange: exchange, only: .headers)
        return (found[.headers], timedOut)
    }
}
