import BusymateShared
import Logging
import NIOHTTP1

/// The rules as a hook: they edit the request head (before it is recorded
/// and sent), block it or answer it locally, and edit the response head.
/// With no rules set, each step is one atomic load.
struct RuleHook: ExchangeHook {
    var steers: Bool { true }
    let rules: RuleEngine

    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) {
        guard !rules.isEmpty else { return }
        let snapshot = rules.snapshot
        if snapshot.usesFilters { flow.describe(head) }
        let later = snapshot.choosesAtResponse
        flow.plan = snapshot.plan(for: flow.url, exchange: flow.subject, responseLater: later)
        flow.rulesAtResponse = later ? snapshot : nil
        for name in flow.plan.timedOut { flow.notes.append(Self.timedOut(name)) }
        guard let edits = flow.plan.requestEdits else { return }
        Self.logger.debug("request headers edited by a rule", metadata: ["URL": "\(flow.url)"])
        edits.apply(to: &head.headers)
        // Hooks after this one (breakpoints) see the request as it goes on.
        flow.subject?.requestHeaders = head.headers.map { ($0.name, $0.value) }
    }

    func decide(request flow: inout ExchangeFlow) -> ExchangeHooks.RequestDecision? {
        if let rule = flow.plan.block {
            flow.applied(rule.name)
            Self.logger.debug("blocked by a rule", metadata: Self.metadata(rule.name, flow))
            return .block(rule)
        }
        if let rule = flow.plan.mapLocal {
            flow.applied(rule.name)
            Self.logger.debug("answered locally by a rule", metadata: Self.metadata(rule.name, flow))
            return .mapLocal(rule)
        }
        return nil
    }

    /// `journalctl SUBSYSTEM=rules`: what the rules did (at debug, per
    /// request; the set in force at info, from the engine).
    static let logger = Logger(label: "busymate.rules")

    static func metadata(_ rule: String, _ flow: ExchangeFlow) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["RULE": "\(rule)", "URL": "\(flow.url)"]
        if let id = flow.requestID { metadata["REQUEST_ID"] = "\(id)" }
        return metadata
    }

    /// The plan's response edits, or, when a headers rule's filter reads the
    /// response, the first headers rule that matches the exchange now
    /// (named on the row once it applies).
    func responseHead(_ head: inout HTTPResponseHead, _ flow: inout ExchangeFlow) {
        if let snapshot = flow.rulesAtResponse, let exchange = flow.subject(with: head) {
            flow.rulesAtResponse = nil
            let (found, timedOut) = snapshot.responseRule(for: exchange)
            for name in timedOut where !flow.plan.timedOut.contains(name) {
                flow.plan.timedOut.append(name)
                flow.notes.append(Self.timedOut(name))
            }
            if let rule = found, case let .headers(_, edits) = rule.action, !edits.isEmpty {
                flow.plan.responseEdits = edits
                flow.applied(rule.name)
            } else {
                flow.plan.responseEdits = nil
            }
        }
        flow.plan.responseEdits?.apply(to: &head.headers)
    }

    /// The note for a rule whose filter ran out of the request's budget.
    static func timedOut(_ rule: String) -> String {
        "the filter of rule \"\(rule)\" ran past \(RuleMatch.timeLimit) on this request and was taken as no match (simplify its regular expression)"
    }
}
