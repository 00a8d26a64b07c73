import Foundation

/// The filter language's in-memory matcher: the same meaning as the SQL
/// the store runs (`CaptureFilterSQL`), clause by clause, over one
/// exchange. A missing subject (no status, no response, no mark) matches
/// no clause, so `!` is the complement, as in SQL.
extension CaptureFilter {
    /// Throws when a regular expression runs past `limit` on one value.
    public func matches(_ subject: FilterSubject, within limit: Duration = FilterPattern.timeLimit) throws(FilterPatternTimeout) -> Bool {
        try matches(subject, budget: .perValue(limit))
    }

    package func matches(_ subject: FilterSubject, budget: FilterBudget) throws(FilterPatternTimeout) -> Bool {
        switch self {
        case let .clause(clause): return try clause.matches(subject, budget)
        case let .not(inner): return try !inner.matches(subject, budget: budget)
        // Not `&&` and `||`: their autoclosures rethrow untyped.
        case let .and(left, right):
            guard try left.matches(subject, budget: budget) else { return false }
            return try right.matches(subject, budget: budget)
        case let .or(left, right):
            if try left.matches(subject, budget: budget) { return true }
            return try right.matches(subject, budget: budget)
        }
    }

    /// Every clause, depth first (walked without recursion).
    public var clauses: [Clause] {
        var out: [Clause] = []
        var pending = [self]
        while let next = pending.popLast() {
            switch next {
            case let .clause(clause): out.append(clause)
            case let .not(inner): pending.append(inner)
            case let .and(left, right), let .or(left, right): pending += [right, left]
            }
        }
        return out
    }
}

extension CaptureFilter.Clause {
    func matches(_ s: FilterSubject, _ budget: FilterBudget) throws(FilterPatternTimeout) -> Bool {
        func match(_ pattern: String, _ text: String?) throws(FilterPatternTimeout) -> Bool { try budget.match(pattern, text) }
        func either(_ side: CaptureFilter.Side, _ test: (Bool) throws(FilterPatternTimeout) -> Bool) throws(FilterPatternTimeout) -> Bool {
            switch side {
            case .request: return try test(true)
            case .response: return try test(false)
            case .either:
                if try test(true) { return true }
                return try test(false)
            }
        }
        switch self {
        case .all: return true
        case let .domain(pattern): return try match(pattern, s.host)
        case let .url(pattern):
            if try match(pattern, s.url) { return true }
            guard s.url.contains("%"), let decoded = s.url.removingPercentEncoding, decoded != s.url else { return false }
            return try match(pattern, decoded)
        case let .method(pattern): return try match(pattern, s.method)
        case let .status(range): return s.status.map(range.contains) ?? false
        case let .header(pattern, side):
            return try either(side) { (request: Bool) throws(FilterPatternTimeout) in
                for (name, value) in (request ? s.requestHeaders : s.responseHeaders) ?? [] where try match(pattern, "\(name): \(value)") {
                    return true
                }
                return false
            }
        case let .body(pattern, side):
            return try either(side) { (request: Bool) throws(FilterPatternTimeout) in
                // An empty body is none; one that decodes to nothing is "" (as in SQL).
                guard let body = request ? s.requestBody : s.responseBody else { return false }
                return try match(pattern, body)
            }
        case let .contentType(pattern, side):
            return try either(side) { (request: Bool) throws(FilterPatternTimeout) in
                try match(pattern, s.header("content-type", in: request ? s.requestHeaders : s.responseHeaders))
            }
        case .error: return s.error != nil
        case .noResponse: return s.responseHeaders == nil
        case let .source(pattern): return try match(pattern, s.client)
        case let .destination(pattern): return try match(pattern, s.server)
        case .websocket: return s.status == 101 && s.header("upgrade", in: s.responseHeaders).map(Self.asciiLowercased) == "websocket"
        case .marked: return !(s.marker ?? "").isEmpty
        case let .marker(pattern): return try match(pattern, s.marker)
        case let .comment(pattern): return try match(pattern, s.comment)
        case .replayedResponse, .udp: return false
        case .response: return s.responseHeaders != nil
        case .asset: return try match(CaptureFilter.assetTypes, s.header("content-type", in: s.responseHeaders))
        case .http: return (s.scheme == "http" || s.scheme == "https") && s.method != "CONNECT"
        case .tcp: return s.scheme == "tcp"
        case let .device(pattern): return try match(pattern, s.device)
        case .dns: return s.scheme == "dns"
        // Byte for byte, as SQL compares (not Swift's canonical equivalence).
        case let .proto(version):
            return s.httpVersion.map { stored in version.versions.contains { $0.utf8.elementsEqual(stored.utf8) } } ?? false
        case .grpc:
            guard let type = s.header("content-type", in: s.requestHeaders) else { return false }
            return Self.asciiLowercased(type).utf8.starts(with: CaptureFilter.grpcType.utf8)
        case .replay: return s.resent
        case let .tls(mode): return s.tls == mode
        case let .rule(pattern): return try match(pattern, s.rules)
        case let .since(date): return Self.milliseconds(s.startedAt) >= Self.milliseconds(date)
        case let .until(date): return Self.milliseconds(s.startedAt) <= Self.milliseconds(date)
        }
    }

    /// Lowercased as SQLite's lower() does, ASCII only (Swift's lowercased()
    /// also folds, say, the Kelvin sign to k).
    static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 &- 65 < 26 ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// A time as the store keeps it, and its SQL compares it: in whole
    /// milliseconds, rounded as `DatabaseDateText` rounds.
    static func milliseconds(_ date: Date) -> Double { (date.timeIntervalSince1970 * 1000).rounded() }

    /// How the filter text names this clause (`~hs`, `~c`), for messages.
    public var name: String {
        func sided(_ stem: String, _ side: CaptureFilter.Side) -> String {
            switch side {
            case .either: return stem
            case .request: return stem + "q"
            case .response: return stem + "s"
            }
        }
        switch self {
        case .all: return "~all"
        case .domain: return "~d"
        case .url: return "~u"
        case .method: return "~m"
        case .status: return "~c"
        case let .header(_, side): return sided("~h", side)
        case let .body(_, side): return sided("~b", side)
        case let .contentType(_, side): return sided("~t", side)
        case .error: return "~e"
        case .noResponse: return "~q"
        case .source: return "~src"
        case .destination: return "~dst"
        case .websocket: return "~websocket"
        case .marked: return "~marked"
        case .marker: return "~marker"
        case .comment: return "~comment"
        case .replay: return "~replay"
        case .replayedResponse: return "~replays"
        case .response: return "~s"
        case .asset: return "~a"
        case .http: return "~http"
        case .tcp: return "~tcp"
        case .udp: return "~udp"
        case .tls: return "~tls"
        case .rule: return "~rule"
        case .device: return "~device"
        case .dns: return "~dns"
        case .proto: return "~proto"
        case .grpc: return "~grpc"
        case .since: return "~since"
        case .until: return "~until"
        }
    }

    /// Its regular expression, for a clause that has one.
    public var pattern: String? {
        switch self {
        case let .domain(p), let .url(p), let .method(p), let .header(p, _), let .body(p, _), let .contentType(p, _), let .source(p),
            let .destination(p), let .marker(p), let .comment(p), let .rule(p), let .device(p):
            return p
        case .asset: return CaptureFilter.assetTypes
        default: return nil
        }
    }

    /// Whether it reads only the response, or its absence: what a rule
    /// deciding before any response cannot test.
    public var readsResponse: Bool {
        switch self {
        case .status, .websocket, .response, .asset, .noResponse: return true
        case let .header(_, side), let .contentType(_, side): return side == .response
        default: return false
        }
    }

    /// Whether it may read the response (`~h`, `~t` read either message):
    /// a headers rule with it is decided again at the response head.
    public var mayReadResponse: Bool {
        switch self {
        case let .header(_, side), let .contentType(_, side): return side != .request
        default: return readsResponse
        }
    }
}
