import Foundation

/// What a rule or a breakpoint matches: a URL pattern (`api.example.com/v1/*`), or an
/// expression of the filter language (`~d api & ~m POST`, as mitmproxy's
/// `modify_headers` and `map_remote` take), told apart by the first
/// character: `~`, `!` or `(` start a filter; a bare word is a URL pattern.
public enum RuleMatch: Sendable, Equatable {
    case url(URLPattern)
    case filter(CaptureFilter, text: String)

    /// How long a rule's regular expression may run over one value: it
    /// runs on the connection's event loop, per request.
    public static let timeLimit: Duration = .milliseconds(20)

    public var text: String {
        switch self {
        case let .url(pattern): return pattern.text
        case let .filter(_, text): return text
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
            guard let pattern = URLPattern(text) else { return .failure(RuleMatchError(message: URLPattern.problem(with: text) ?? "not a URL pattern")) }
            return .success(.url(pattern))
        }
        let filter: CaptureFilter
        do {
            filter = try CaptureFilter.parse(text)
        } catch {
            return .failure(RuleMatchError(message: error.message, position: error.position))
        }
        for clause in filter.clauses {
            if let why = problem(with: clause, beforeResponse: beforeResponse) { return .failure(RuleMatchError(message: why)) }
        }
        return .success(.filter(filter, text: text))
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
        default:
            guard clause.readsResponse, let moment = beforeResponse else { return nil }
            return "\(name) reads the response, and \(moment.actor) acts before there is one; use it in \(moment.instead)"
        }
    }

    /// Whether the rule matches `url` (a URL pattern), or the request
    /// `exchange` (a filter). A regular expression that runs too long
    /// does not match.
    func matches(url: URLPattern.Subject, exchange: () -> FilterSubject) -> Bool {
        switch self {
        case let .url(pattern): return pattern.matches(url)
        case let .filter(filter, _): return (try? filter.matches(exchange(), within: Self.timeLimit)) ?? false
        }
    }

    public func matches(_ subject: FilterSubject) -> Bool {
        matches(url: URLPattern.Subject(subject.url)) { subject }
    }

    public var isFilter: Bool {
        if case .filter = self { return true }
        return false
    }

    /// Whether a filter tests the response (a headers rule's response edits then wait for it).
    public var readsResponse: Bool {
        guard case let .filter(filter, _) = self else { return false }
        return filter.clauses.contains { $0.readsResponse || $0 == .noResponse }
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

/// Why a rule's `match` was refused; `position` (from 1) is in the filter.
public struct RuleMatchError: Error, Sendable {
    public var message: String
    public var position: Int?
}
