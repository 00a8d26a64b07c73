import BusymateShared
import Foundation
import GRDB

extension CaptureFilter {
    /// This filter as a condition on `exchanges`, for `WHERE`. Each clause
    /// is 0 or 1, never NULL, so `!` is the complement (`!~c 4xx` keeps the
    /// rows with no status). Patterns are matched by the SQL functions of
    /// `FilterFunctions` (registered on every connection to the store). In
    /// an `&`, clauses that read bodies go last: SQLite stops at the first
    /// clause that refuses a row, so bodies are read only for rows the
    /// cheaper clauses leave.
    public var sql: SQL {
        switch self {
        case let .clause(clause):
            return Self.sql(clause)
        case let .not(inner):
            return "NOT \(inner.operand)"
        case .and:
            let all = conjuncts
            let terms = all.filter { !$0.readsBodies } + all.filter(\.readsBodies)
            return terms.dropFirst().reduce(terms[0].operand) { joined, term in "\(joined) AND \(term.operand)" }
        case .or:
            // Flat, and parenthesised only where precedence needs it: SQLite's
            // parser stack (100 states) overflowed at 80 or-ed clauses, and at
            // 12 levels of `(a | b & !…)`, when every term had its own pair.
            let terms = disjuncts
            return terms.dropFirst().reduce(terms[0].sql) { joined, term in "\(joined) OR \(term.sql)" }
        }
    }

    /// This filter's SQL where an operator binding tighter than OR takes
    /// it (after NOT, beside AND): in parentheses unless it is one term.
    private var operand: SQL {
        switch self {
        case let .clause(clause): return clause.isDisjunction ? "(\(sql))" : sql
        case .not: return sql
        case .and, .or: return "(\(sql))"
        }
    }

    /// The terms of a chain of `&`, in order (walked without recursion: a
    /// chain is as long as the filter has clauses).
    private var conjuncts: [CaptureFilter] {
        flattened { if case let .and(l, r) = $0 { return (l, r) } else { return nil } }
    }

    /// The terms of a chain of `|`, in order.
    private var disjuncts: [CaptureFilter] {
        flattened { if case let .or(l, r) = $0 { return (l, r) } else { return nil } }
    }

    private func flattened(_ split: (CaptureFilter) -> (CaptureFilter, CaptureFilter)?) -> [CaptureFilter] {
        var terms: [CaptureFilter] = []
        var pending = [self]
        while let next = pending.popLast() {
            if let (left, right) = split(next) {
                pending.append(right)
                pending.append(left)
            } else {
                terms.append(next)
            }
        }
        return terms
    }

    /// Whether matching reads bodies (the dearest clause).
    var readsBodies: Bool {
        var pending = [self]
        while let next = pending.popLast() {
            switch next {
            case let .clause(clause): if case .body = clause { return true }
            case let .not(inner): pending.append(inner)
            case let .and(left, right), let .or(left, right): pending += [left, right]
            }
        }
        return false
    }

    private static func sql(_ clause: Clause) -> SQL {
        switch clause {
        case .all: return "1"
        case let .domain(pattern): return "busymate_match(\(pattern), host)"
        case let .url(pattern): return "busymate_match_url(\(pattern), url)"
        case let .method(pattern): return "busymate_match(\(pattern), method)"
        case let .status(range): return "coalesce(status BETWEEN \(range.lowerBound) AND \(range.upperBound), 0)"
        case let .header(pattern, side):
            return either(
                side,
                request: "busymate_match_headers(\(pattern), request_headers)",
                response: "busymate_match_headers(\(pattern), response_headers)")
        case let .body(pattern, side):
            // A WebSocket's messages are its bodies: ~bq the client's, ~bs the server's.
            // Each side is two terms: parenthesized, so `!` and `&` take it whole.
            return either(
                side,
                request:
                    "(busymate_match_body(\(pattern), request_body, request_body_file, request_headers) OR \(messages(pattern, fromClient: true)))",
                response:
                    "(busymate_match_body(\(pattern), response_body, response_body_file, response_headers) OR \(messages(pattern, fromClient: false)))"
            )
        case let .contentType(pattern, side):
            return either(
                side,
                request: "busymate_match(\(pattern), busymate_header(request_headers, 'content-type'))",
                response: "busymate_match(\(pattern), busymate_header(response_headers, 'content-type'))")
        case .error: return "error IS NOT NULL"
        case .noResponse: return "response_headers IS NULL"
        case let .source(pattern): return "busymate_match(\(pattern), client_address)"
        case let .destination(pattern): return "busymate_match(\(pattern), server_address)"
        // A socket the proxy read, or a handshake whose bytes were glued (or imported).
        case .websocket:
            return
                "(EXISTS (SELECT 1 FROM websockets WHERE exchange_id = exchanges.id) OR coalesce(status = 101 AND lower(busymate_header(response_headers, 'upgrade')) = 'websocket', 0))"
        case .marked: return "coalesce(marker <> '', 0)"
        case let .marker(pattern): return "busymate_match(\(pattern), marker)"
        case let .comment(pattern): return "busymate_match(\(pattern), comment)"
        case .replayedResponse, .udp: return "0"
        case .response: return "response_headers IS NOT NULL"
        case .asset: return "busymate_match(\(Self.assetTypes), busymate_header(response_headers, 'content-type'))"
        case .http: return "coalesce(scheme IN ('http', 'https') AND method <> 'CONNECT', 0)"
        case .tcp: return "scheme = 'tcp'"
        case let .device(pattern): return "busymate_match(\(pattern), device)"
        case .dns: return "scheme = 'dns'"
        case let .proto(version): return "coalesce(http_version IN \(version.versions), 0)"
        // lower() folds ASCII only, as the in-memory matcher does; substr counts characters.
        case .grpc:
            return
                "coalesce(substr(lower(busymate_header(request_headers, 'content-type')), 1, \(Self.grpcType.count)) = \(Self.grpcType), 0)"
        case .replay: return "resent_from IS NOT NULL"
        case let .tls(mode): return "tls_mode = \(mode.rawValue)"
        case let .rule(pattern): return "busymate_match(\(pattern), rule)"
        case let .since(date): return "started_at >= \(DatabaseDateText.string(date))"
        case let .until(date): return "started_at <= \(DatabaseDateText.string(date))"
        }
    }

    private static func messages(_ pattern: String, fromClient: Bool) -> SQL {
        """
        EXISTS (SELECT 1 FROM ws_messages m WHERE m.exchange_id = exchanges.id AND m.from_client = \(fromClient) \
        AND busymate_match_message(\(pattern), m.payload, m.payload_file, m.payload_offset, m.stored))
        """
    }

    private static func either(_ side: Side, request: SQL, response: SQL) -> SQL {
        // Each side is one term (a function call): no parentheses needed.
        switch side {
        case .request: return request
        case .response: return response
        case .either: return "\(request) OR \(response)"
        }
    }
}

/// The SQL functions filters compile to. Each takes its pattern first and
/// answers 0 for a NULL subject.
enum FilterFunctions {
    static func register(in db: Database, bodies: BodyStore) {
        db.add(function: match)
        db.add(function: matchURL)
        db.add(function: matchHeaders)
        db.add(function: header)
        db.add(function: matchBody(bodies))
        db.add(function: matchMessage(bodies))
    }

    private static func pattern(_ value: DatabaseValue) -> FilterPattern? {
        String.fromDatabaseValue(value).flatMap(FilterPattern.cached)
    }

    /// `busymate_match(pattern, text)`
    static let match = DatabaseFunction("busymate_match", argumentCount: 2, pure: true) { values in
        guard let pattern = pattern(values[0]), let text = String.fromDatabaseValue(values[1]) else { return false }
        return try pattern.matches(text)
    }

    /// `busymate_match_url(pattern, url)`: the URL as sent, or percent-decoded.
    static let matchURL = DatabaseFunction("busymate_match_url", argumentCount: 2, pure: true) { values in
        guard let pattern = pattern(values[0]), let url = String.fromDatabaseValue(values[1]) else { return false }
        if try pattern.matches(url) { return true }
        guard url.contains("%"), let decoded = url.removingPercentEncoding, decoded != url else { return false }
        return try pattern.matches(decoded)
    }

    /// `busymate_match_headers(pattern, headers_json)`: any `Name: value` line.
    static let matchHeaders = DatabaseFunction("busymate_match_headers", argumentCount: 2, pure: true) { values in
        guard let pattern = pattern(values[0]), let json = String.fromDatabaseValue(values[1]) else { return false }
        // Plain text with no colon, quote or space (the line's ": " is not in the JSON) is in the
        // JSON wherever it is in a header: skip the rest cheaply.
        if pattern.isPlainText(without: ":\"\\ "), try !pattern.matches(json) { return false }
        return try ExchangeRecord.decodeHeaders(json).contains { try pattern.matches("\($0.0): \($0.1)") }
    }

    /// `busymate_header(headers_json, name)`: the first value of a header, or NULL.
    static let header = DatabaseFunction("busymate_header", argumentCount: 2, pure: true) { values in
        guard let json = String.fromDatabaseValue(values[0]), let name = String.fromDatabaseValue(values[1]),
            FilterPattern.mentions(json, name)
        else { return nil }
        return ExchangeRecord.decodeHeaders(json).first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }

    /// `busymate_match_body(pattern, inline, file, headers_json)`: the body as
    /// the client or server meant it (Content-Encoding undone), whole from its
    /// file when it has one. Bytes that are not UTF-8 match as U+FFFD.
    static func matchBody(_ bodies: BodyStore) -> DatabaseFunction {
        DatabaseFunction("busymate_match_body", argumentCount: 4, pure: false) { values in
            guard let pattern = pattern(values[0]) else { return false }
            var body = Data.fromDatabaseValue(values[1])
            if let file = String.fromDatabaseValue(values[2]), let whole = try? bodies.read(file) { body = whole }
            guard var data = body, !data.isEmpty else { return false }
            // Most bodies are not encoded: read the headers only when they say it.
            if let json = String.fromDatabaseValue(values[3]), FilterPattern.mentions(json, "content-encoding"),
                let encoding = ExchangeRecord.decodeHeaders(json).first(where: {
                    $0.0.caseInsensitiveCompare("content-encoding") == .orderedSame
                })?.1,
                let decoded = BodyDecoder.decode(data, encoding: encoding)
            {
                data = decoded
            }
            return try pattern.matches(String(decoding: data, as: UTF8.self))
        }
    }

    /// `busymate_match_message(pattern, inline, file, offset, stored)`: a
    /// WebSocket message's payload as stored (inflated), from the socket's
    /// file when it is there.
    static func matchMessage(_ bodies: BodyStore) -> DatabaseFunction {
        DatabaseFunction("busymate_match_message", argumentCount: 5, pure: false) { values in
            guard let pattern = pattern(values[0]) else { return false }
            var payload = Data.fromDatabaseValue(values[1])
            if let file = String.fromDatabaseValue(values[2]), let offset = Int.fromDatabaseValue(values[3]),
                let stored = Int.fromDatabaseValue(values[4])
            {
                payload = try? bodies.read(file, offset: offset, length: stored).data
            }
            guard let payload, !payload.isEmpty else { return false }
            return try pattern.matches(String(decoding: payload, as: UTF8.self))
        }
    }
}
