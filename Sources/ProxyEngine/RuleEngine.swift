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
        let subject = URLPattern.Subject(url)
        return rules.withLock { $0.first { $0.kind == kind && $0.pattern.matches(subject) } }
    }

    /// The first enabled rule of each kind that matches `url`: one pass,
    /// the URL taken apart once.
    func firstOfEachKind(for url: String) -> [Rule.Kind: Rule] {
        let subject = URLPattern.Subject(url)
        return rules.withLock { rules in
            var found: [Rule.Kind: Rule] = [:]
            for rule in rules where found[rule.kind] == nil && rule.pattern.matches(subject) {
                found[rule.kind] = rule
            }
            return found
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
    func plan(for url: String) -> RulePlan {
        var plan = RulePlan()
        guard !isEmpty else { return plan }
        let first = firstOfEachKind(for: url)
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
            plan.responseEdits = response.isEmpty ? nil : response
            plan.applied.append(rule.name)
        }
        return plan
    }
}
