import BusymateShared
import Synchronization

/// `settings.json`'s rules as the data path reads them: replaced whole on
/// every settings change, consulted once per request and kind. With no
/// rules the check is one atomic load; with URL patterns alone, no
/// request is described beyond its URL.
public final class RuleEngine: Sendable {
    private let rules = Mutex<[Rule]>([])
    private let any = Atomic<Bool>(false)
    private let filters = Atomic<Bool>(false)
    private let responseFilters = Atomic<Bool>(false)

    public init() {}

    public func apply(_ settings: AppSettings) {
        let enabled = settings.rules.filter(\.enabled)
        rules.withLock { $0 = enabled }
        any.store(!enabled.isEmpty, ordering: .relaxed)
        filters.store(enabled.contains { $0.match.isFilter }, ordering: .relaxed)
        responseFilters.store(enabled.contains { $0.kind == .headers && $0.match.readsResponse }, ordering: .relaxed)
    }

    /// No enabled rules: the data path skips building a URL to match.
    var isEmpty: Bool { !any.load(ordering: .relaxed) }

    /// Some enabled rule matches with a filter: requests are described whole (`FilterSubject`).
    var usesFilters: Bool { filters.load(ordering: .relaxed) }

    /// Some enabled headers rule's filter reads the response: the response
    /// edits are chosen again when the response comes.
    var choosesAtResponse: Bool { responseFilters.load(ordering: .relaxed) }

    /// The first enabled rule of `kind` that matches `url` (a URL pattern)
    /// or `exchange` (a filter; none without it).
    func first(_ kind: Rule.Kind, for url: String, exchange: FilterSubject?) -> Rule? {
        guard any.load(ordering: .relaxed) else { return nil }
        let subject = URLPattern.Subject(url)
        return rules.withLock { $0.first { $0.kind == kind && Self.matches($0, subject, exchange) } }
    }

    /// The first enabled rule of each kind that matches: one pass, the URL
    /// taken apart once.
    func firstOfEachKind(for url: String, exchange: FilterSubject?) -> [Rule.Kind: Rule] {
        let subject = URLPattern.Subject(url)
        return rules.withLock { rules in
            var found: [Rule.Kind: Rule] = [:]
            for rule in rules where found[rule.kind] == nil && Self.matches(rule, subject, exchange) {
                found[rule.kind] = rule
            }
            return found
        }
    }

    private static func matches(_ rule: Rule, _ url: URLPattern.Subject, _ exchange: FilterSubject?) -> Bool {
        switch rule.match {
        case let .url(pattern): return pattern.matches(url)
        case .filter: return exchange.map(rule.match.matches) ?? false
        }
    }
}

/// What the rules decide for one request: the first enabled match of each
/// kind. A block wins over everything; a local answer over dialling.
struct RulePlan {
    var block: Rule?
    var mapLocal: Rule?
    var mapRemote: Rule?
    var hostOverride: String?
    var requestEdits: Rule.HeaderEdits?
    var responseEdits: Rule.HeaderEdits?
    /// The rules that applied, for the capture row (block and map_local
    /// add theirs where they act).
    var applied: [String] = []
}

extension RuleEngine {
    /// With `responseLater`, a headers rule's response edits are left to
    /// `responseRule` (its filter reads the response).
    func plan(for url: String, exchange: FilterSubject?, responseLater: Bool = false) -> RulePlan {
        var plan = RulePlan()
        guard !isEmpty else { return plan }
        let first = firstOfEachKind(for: url, exchange: exchange)
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
    func responseRule(for exchange: FilterSubject) -> Rule? {
        first(.headers, for: exchange.url, exchange: exchange)
    }
}
