import Foundation

/// Why a rule that matches a URL applies or not, as the tunnel decides:
/// the first enabled match of each kind; a block ends it; a local answer
/// is never dialled. (`busymate rules test`, the page's "test a URL".)
public struct RuleVerdict: Sendable {
    public enum Reason: String, Sendable {
        case applies, disabled, shadowed, blocked, answeredLocally = "answered_locally"
        /// A headers rule whose filter may read the response: decided when it comes.
        case atResponse = "at_response"
    }
    /// 1-based, as `rules list` numbers them.
    public var index: Int
    public var rule: Rule
    public var reason: Reason
    /// The rule that decides, when another does.
    public var by: String?

    /// As an HTTP/1.1 request (`rules test` without `--http2`, the page's test).
    public static func verdicts(_ rules: [Rule], url: String, method: String = "GET") -> [RuleVerdict] {
        var exchange = FilterSubject(url: url, method: method)
        exchange.httpVersion = "HTTP/1.1"
        return verdicts(rules, exchange: exchange)
    }

    /// A filter rule is tested on the request alone; a headers rule whose
    /// filter may read the response and does not match the request is
    /// listed as decided at the response.
    public static func verdicts(_ rules: [Rule], exchange: FilterSubject) -> [RuleVerdict] {
        var pending: [RuleVerdict] = []
        let matching = rules.enumerated().filter { i, rule in
            if rule.match.matches(exchange) { return true }
            if rule.kind == .headers, rule.enabled, rule.match.readsResponse {
                pending.append(RuleVerdict(index: i + 1, rule: rule, reason: .atResponse))
            }
            return false
        }
        var first: [Rule.Kind: String] = [:]
        for (_, rule) in matching where rule.enabled && first[rule.kind] == nil { first[rule.kind] = rule.name }
        let decided = matching.map { i, rule in
            if !rule.enabled { return RuleVerdict(index: i + 1, rule: rule, reason: .disabled) }
            if first[rule.kind] != rule.name { return RuleVerdict(index: i + 1, rule: rule, reason: .shadowed, by: first[rule.kind]) }
            if let block = first[.block], rule.kind != .block { return RuleVerdict(index: i + 1, rule: rule, reason: .blocked, by: block) }
            if let local = first[.mapLocal], rule.kind == .hostOverride {
                return RuleVerdict(index: i + 1, rule: rule, reason: .answeredLocally, by: local)
            }
            return RuleVerdict(index: i + 1, rule: rule, reason: .applies)
        }
        return (decided + pending).sorted { $0.index < $1.index }
    }

    /// `rules test --json`: the request tested, each matching rule with its verdict, the names of those that apply.
    public static func json(_ verdicts: [RuleVerdict], url: String, method: String = "GET") -> JSONNode {
        func string(_ s: String?) -> JSONNode { JSONNode(s.map { .string($0) } ?? .null) }
        return JSONNode(
            .object([
                ("url", string(url)),
                ("method", string(method)),
                (
                    "matches",
                    JSONNode(
                        .array(
                            verdicts.map { v in
                                JSONNode(
                                    .object([
                                        ("index", JSONNode(.number(String(v.index)))), ("name", string(v.rule.name)),
                                        ("action", string(v.rule.actionName)),
                                        ("enabled", JSONNode(.bool(v.rule.enabled))), ("applies", JSONNode(.bool(v.reason == .applies))),
                                        ("reason", string(v.reason.rawValue)), ("by", string(v.by)),
                                    ]))
                            }))
                ),
                ("applied", JSONNode(.array(verdicts.filter { $0.reason == .applies }.map { string($0.rule.name) }))),
            ]))
    }
}

extension Rule {
    /// As settings.json names it (`block` and `drop` are one kind).
    public var actionName: String {
        switch action {
        case .block: return "block"
        case .drop: return "drop"
        case .mapLocal: return "map_local"
        case .mapRemote: return "map_remote"
        case .hostOverride: return "host_override"
        case .headers: return "headers"
        }
    }
}
