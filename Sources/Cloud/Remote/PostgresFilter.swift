import BusymateShared
import CaptureStore
import Foundation

/// A filter (`CaptureFilter`) compiled to PostgreSQL over the `entries`
/// table, whose `payload` is the exchange as `show --json` has it. Patterns
/// are PostgreSQL's case-insensitive regular expressions (`~*`), bound as
/// parameters. Each clause is true or false, never NULL, so `!` is the
/// complement, as in the store's SQL.
public struct PostgresFilter: Sendable {
    /// The condition, for `WHERE`.
    public private(set) var sql = "TRUE"
    /// The text of each `$n`, in order.
    public private(set) var parameters: [String] = []

    public init(_ filter: CaptureFilter?, firstParameter: Int = 1) {
        next = firstParameter
        if let filter { sql = compile(filter) }
    }

    private var next: Int

    private mutating func bind(_ text: String, as type: String = "text") -> String {
        parameters.append(text)
        defer { next += 1 }
        return "$\(next)::\(type)"
    }

    private mutating func compile(_ filter: CaptureFilter) -> String {
        switch filter {
        case let .clause(clause): return clauseSQL(clause)
        case let .not(inner): return "NOT (\(compile(inner)))"
        case let .and(left, right): return "(\(compile(left))) AND (\(compile(right)))"
        case let .or(left, right): return "(\(compile(left))) OR (\(compile(right)))"
        }
    }

    private static let payload = "payload"

    private func field(_ path: String...) -> String {
        guard let last = path.last else { return Self.payload }
        return Self.payload + path.dropLast().map { "->'\($0)'" }.joined() + "->>'\(last)'"
    }

    /// `pattern` searched in `subject`; false for a NULL subject.
    private mutating func match(_ pattern: String, _ subject: String) -> String {
        "coalesce(\(subject) ~* \(bind(pattern)), false)"
    }

    /// Any `Name: value` line of one side's headers.
    private mutating func headers(_ pattern: String, _ side: String) -> String {
        let list = "\(Self.payload)->'\(side)'->'headers'"
        return "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(\(list)) WHEN 'array' THEN \(list) ELSE '[]'::jsonb END) AS h "
            + "WHERE (h->>0) || ': ' || (h->>1) ~* \(bind(pattern)))"
    }

    private func header(_ name: String, is value: String, _ side: String) -> String {
        let list = "\(Self.payload)->'\(side)'->'headers'"
        return "EXISTS (SELECT 1 FROM jsonb_array_elements(CASE jsonb_typeof(\(list)) WHEN 'array' THEN \(list) ELSE '[]'::jsonb END) AS h "
            + "WHERE lower(h->>0) = '\(name)' AND lower(h->>1) = '\(value)')"
    }

    private mutating func either(_ side: CaptureFilter.Side, _ make: (inout PostgresFilter, String) -> String) -> String {
        switch side {
        case .request: return make(&self, "request")
        case .response: return make(&self, "response")
        case .either:
            let request = make(&self, "request")
            return "(\(request) OR \(make(&self, "response")))"
        }
    }

    private var hasResponse: String { "coalesce(jsonb_typeof(\(Self.payload)->'response') = 'object', false)" }

    private mutating func clauseSQL(_ clause: CaptureFilter.Clause) -> String {
        switch clause {
        case .all: return "TRUE"
        case let .domain(pattern): return match(pattern, field("host"))
        case let .url(pattern): return match(pattern, field("url"))
        case let .method(pattern): return match(pattern, field("method"))
        case let .status(range):
            return "coalesce((\(field("status")))::int BETWEEN \(range.lowerBound) AND \(range.upperBound), false)"
        case let .header(pattern, side): return either(side) { $0.headers(pattern, $1) }
        // Bodies the cloud holds as text (64 KiB at most); base64 ones do not match.
        case let .body(pattern, side): return either(side) { $0.match(pattern, $0.field($1, "body", "text")) }
        case let .contentType(pattern, side): return either(side) { $0.match(pattern, $0.field("\($1)_content_type")) }
        case .error: return "(\(field("error")) IS NOT NULL)"
        case .noResponse: return "NOT \(hasResponse)"
        case .response: return hasResponse
        case let .source(pattern): return match(pattern, field("client_address"))
        case let .destination(pattern): return match(pattern, field("server_address"))
        case .websocket: return "(coalesce((\(field("status")))::int = 101, false) AND \(header("upgrade", is: "websocket", "response")))"
        case .marked: return "coalesce(\(field("marker")) <> '', false)"
        case let .marker(pattern): return match(pattern, field("marker"))
        case let .comment(pattern): return match(pattern, field("comment"))
        case .replayedResponse, .udp: return "FALSE"
        case .asset: return match(CaptureFilter.assetTypes, field("response_content_type"))
        case .http: return "coalesce(\(field("request", "scheme")) IN ('http', 'https') AND \(field("method")) <> 'CONNECT', false)"
        case .tcp: return "coalesce(\(field("request", "scheme")) = 'tcp', false)"
        case let .device(pattern): return match(pattern, field("device"))
        case .dns: return "(kind = 'dns')"
        case let .proto(version):
            return "coalesce(\(field("http_version")) IN (\(version.versions.map { "'\($0)'" }.joined(separator: ", "))), false)"
        case .grpc: return "coalesce(lower(\(field("request_content_type"))) LIKE '\(CaptureFilter.grpcType)%', false)"
        case .replay: return "(\(field("resent_from_request_id")) IS NOT NULL)"
        case let .tls(mode): return "coalesce(\(field("tls")) = '\(mode.rawValue)', false)"
        case let .rule(pattern): return match(pattern, field("rule"))
        case let .since(date): return "(ts >= \(bind(DatabaseDateText.iso8601(date), as: "timestamptz")))"
        case let .until(date): return "(ts <= \(bind(DatabaseDateText.iso8601(date), as: "timestamptz")))"
        }
    }
}
