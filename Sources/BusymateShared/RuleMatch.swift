import Foundation

/// What a rule or a breakpoint matches: a URL pattern (`api.example.com/v1/*`),
/// or an expression of the filter language (`~d api & ~m POST`, as
/// mitmproxy's `modify_headers` and `map_remote` take), told apart by the
/// first character: `~`, `!` or `(` start a filter; a bare word is a URL
/// pattern. A filter's regular expressions are compiled when settings are
/// read, not per request.
public enum RuleMatch: Sendable, Equatable {
    case url(URLPattern)
    case filter(CaptureFilter, text: String, patterns: [String: FilterPattern])

    /// How long a filter's regular expressions may run over one request,
    /// all values together: it runs on the connection's event loop.
    public static let timeLimit: Duration = .milliseconds(20)

    public static func == (lhs: RuleMatch, rhs: RuleMatch) -> Bool {
        switch (lhs, rhs) {
        case let (.url(l), .url(r)): return l == r
        case let (.filter(l, lt, _), .filter(r, rt, _)): return l == r && lt == rt
        default: return false
        }
    }

    public var text: String {
        switch self {
        case let .url(pattern): return pattern.text
        case let .filter(_, text, _): return text
        }
    }

    public static func isFilter(_ text: String) -> Bool {
        guard let first = text.first(where: { !$0.isWhitespace }) else { return false }
        return first == "~" || first == "!" || first == "("
    }

    /// Why a rule of `kind` cannot match with `text`, or what it matches.
    public static func parse(_ text: String, for kind: Rule.Kind) -> Result<RuleMatch, RuleMatchError> {
        parse(text, at: kind == .headers ? nil : Moment(actor: "a \(kind.rawValue) rule", instead: "a headers rule's response edits"))
    }

    /// What a breakpoint on `side` holds: a request breakpoint decides before any response.
    public static func parse(breakpoint text: String, response: Bool) -> Result<RuleMatch, RuleMatchError> {
        parse(text, at: response ? nil : Moment(actor: "a request breakpoint", instead: "breakpoints.response"))
    }

    /// Who decides before the response, and where a response clause belongs instead.
    struct Moment {
        var actor: String
        var instead: String
    }

    /// `beforeResponse`: the match is decided before any response (nil: at the response head too).
    static func parse(_ text: String, at beforeResponse: Moment?) -> Result<RuleMatch, RuleMatchError> {
        guard isFilter(text) else {
            guard let pattern = URLPattern(text) else {
                return .failure(RuleMatchError(message: URLPattern.problem(with: text) ?? "not a URL pattern"))
            }
            return .success(.url(pattern))
        }
        let filter: CaptureFilter
        do {
            filter = try CaptureFilter.parse(text)
        } catch {
            return .failure(RuleMatchError(message: error.message, position: error.position))
        }
        var patterns: [String: FilterPattern] = [:]
        for clause in filter.clauses {
            if let why = problem(with: clause, beforeResponse: beforeResponse) { return .failure(RuleMatchError(message: why)) }
            if let pattern = clause.pattern, patterns[pattern] == nil { patterns[pattern] = try? FilterPattern(pattern) }
        }
        return .success(.filter(filter, text: text, patterns: patterns))
    }

    /// Clauses a rule (or a breakpoint) cannot test when it acts.
    private static func problem(with clause: CaptureFilter.Clause, beforeResponse: Moment?) -> String? {
        let name = clause.name
        switch clause {
        case .body:
            return "\(name): this match is decided before the body streams; match the URL, method or headers"
        case .since, .until:
            return "\(name): this filter is read once, so a time in it would not move; enable and disable it instead"
        case .marked, .marker, .comment:
            return "\(name): a live exchange has no mark or comment yet"
        case .destination:
            return "\(name): the server is dialled after the rules decide; match its name with ~d"
        case .error:
            return "\(name): an exchange fails after the rules decide"
        case .rule:
            return "\(name): this match cannot depend on which rules applied; order the rules instead"
        case .websocket:
            return "\(name): a 101 switch is neither edited nor held; match the handshake with ~hq \"upgrade: websocket\""
        default:
            guard clause.readsResponse, let moment = beforeResponse else { return nil }
            return "\(name) reads the response, and \(moment.actor) acts before there is one; use it in \(moment.instead)"
        }
    }

    /// Whether a filter matches `exchange`, within `deadline`'s budget; nil
    /// when its regular expressions ran out of it (then it is no match).
    func evaluate(
        _ filter: CaptureFilter, _ patterns: [String: FilterPattern], _ exchange: FilterSubject,
        until deadline: ContinuousClock.Instant
    ) -> Bool? {
        let budget = FilterBudget(deadline: deadline, limit: Self.timeLimit, patterns: patterns)
        do {
            return try filter.matches(exchange, budget: budget)
        } catch {
            return nil
        }
    }

    /// Whether the rule matches `url` (a URL pattern) or the request
    /// `exchange` (a filter; none without it); nil: its filter ran past
    /// the request's budget.
    package func matches(url: URLPattern.Subject, exchange: FilterSubject?, until deadline: ContinuousClock.Instant) -> Bool? {
        switch self {
        case let .url(pattern): return pattern.matches(url)
        case let .filter(filter, _, patterns):
            guard let exchange else { return false }
            return evaluate(filter, patterns, exchange, until: deadline)
        }
    }

    /// One exchange alone (`rules test`, a breakpoint): a timed-out filter is no match.
    public func matches(_ subject: FilterSubject) -> Bool {
        matches(url: URLPattern.Subject(subject.url), exchange: subject, until: ContinuousClock.now.advanced(by: Self.timeLimit)) ?? false
    }

    public var isFilter: Bool {
        if case .filter = self { return true }
        return false
    }

    /// Whether a filter may test the response: a headers rule's response
    /// edits then wait for it (`~h` and `~t` read either message).
    public var readsResponse: Bool {
        guard case let .filter(filter, _, _) = self else { return false }
        return filter.clauses.contains(where: \.mayReadResponse)
    }

    /// The fixed path a URL pattern starts with (`/v1/` of `api.test/v1/*`),
    /// which map_local and map_remote strip; none for a filter.
    public var pathPrefix: String {
        guard case let .url(pattern) = self else { return "" }
        var text = Substring(pattern.text)
        if let scheme = text.range(of: "://") { text = text[scheme.upperBound...] }
        guard let slash = text.firstIndex(of: "/") else { return "" }
        return String(text[slash...].prefix { $0 != "*" })
    }
}
