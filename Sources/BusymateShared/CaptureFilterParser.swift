import Foundation

extension CaptureFilter {
    /// Parses `text`; `now` is what `~since 10m` counts back from.
    /// Precedence as mitmproxy's: `!` binds tightest, then `&`, then `|`;
    /// filters side by side are and-ed, loosest of all (`a | b c` is
    /// `(a | b) & c`).
    public static func parse(_ text: String, now: Date = Date()) throws(FilterError) -> CaptureFilter {
        var parser = CaptureFilterParser(text: text, now: now)
        return try parser.parseWhole()
    }

    /// `~c`'s value alone (`404`, `4xx`, `500-599`), for a flag that means the same.
    public static func statusRange(_ text: String) throws(FilterError) -> ClosedRange<Int> {
        try CaptureFilterParser.status((text, 0))
    }

    /// `~since`'s value alone (`10m`, or an ISO 8601 date), for a flag that means the same.
    public static func time(_ text: String, now: Date = Date()) throws(FilterError) -> Date {
        try CaptureFilterParser.time((text, 0), now: now)
    }
}

/// A recursive-descent parser over the filter's characters; positions are
/// 1-based character offsets, as errors show them.
struct CaptureFilterParser {
    /// Parentheses and `!` inside one another: the parser and the filter's
    /// tree recurse once per level, so a pasted wall of `(` must not take
    /// the stack (3,000 of them did).
    static let maxDepth = 12
    /// Clauses in one filter. Chains of `|` and `&` compile flat, and SQLite
    /// takes up to 1,000 terms in one expression (a `~h` is two).
    static let maxClauses = 300
    /// `~since 36500d` at most: the store's dates have four-digit years.
    static let maxAgo: Double = 100 * 365.25 * 86400

    private let characters: [Character]
    private var index = 0
    private let now: Date
    private var depth = 0
    private var clauses = 0

    init(text: String, now: Date) {
        characters = Array(text)
        self.now = now
    }

    mutating func parseWhole() throws(FilterError) -> CaptureFilter {
        // A NUL ends the pattern early wherever it is handed to C: refuse it rather than match less.
        if let at = characters.firstIndex(of: "\0") {
            throw FilterError(position: at + 1, message: "a NUL character cannot be part of a filter")
        }
        skipSpaces()
        guard index < characters.count else { throw fail("the filter is empty") }
        let filter = try sequence()
        skipSpaces()
        if index < characters.count {
            throw fail(characters[index] == ")" ? "there is no ( for this )" : "unexpected \"\(characters[index])\"")
        }
        return filter
    }

    // MARK: grammar

    /// Filters side by side, and-ed.
    private mutating func sequence() throws(FilterError) -> CaptureFilter {
        var result = try or()
        while true {
            skipSpaces()
            guard let next = peek, next != ")" else { return result }
            result = .and(result, try or())
        }
    }

    private mutating func or() throws(FilterError) -> CaptureFilter {
        var result = try and()
        while take("|") { result = .or(result, try operand(after: "|") { (p: inout Self) throws(FilterError) in try p.and() }) }
        return result
    }

    private mutating func and() throws(FilterError) -> CaptureFilter {
        var result = try unary()
        while take("&") { result = .and(result, try operand(after: "&") { (p: inout Self) throws(FilterError) in try p.unary() }) }
        return result
    }

    private mutating func unary() throws(FilterError) -> CaptureFilter {
        if take("!") {
            try enter()
            defer { depth -= 1 }
            return .not(try operand(after: "!") { (p: inout Self) throws(FilterError) in try p.unary() })
        }
        return try primary()
    }

    /// One level deeper, or an error at the character that went too deep.
    private mutating func enter() throws(FilterError) {
        depth += 1
        guard depth <= Self.maxDepth else {
            throw FilterError(position: index, message: "filters nest at most \(Self.maxDepth) deep (parentheses and ! inside one another)")
        }
    }

    /// What follows an operator, or an error that names the operator.
    private mutating func operand(after op: String, _ parse: (inout Self) throws(FilterError) -> CaptureFilter) throws(FilterError)
        -> CaptureFilter
    {
        skipSpaces()
        guard let next = peek, next != ")", next != "&", next != "|" else { throw fail("expected a filter after \(op)") }
        return try parse(&self)
    }

    private mutating func primary() throws(FilterError) -> CaptureFilter {
        skipSpaces()
        let start = index
        guard let next = peek else { throw fail("expected a filter") }
        switch next {
        case "(":
            index += 1
            try enter()
            defer { depth -= 1 }
            skipSpaces()
            guard peek != ")" else { throw fail("empty parentheses") }
            let inner = try sequence()
            skipSpaces()
            guard take(")") else { throw FilterError(position: start + 1, message: "this ( is never closed") }
            return inner
        case "~":
            return .clause(try clause())
        case "&", "|", ")":
            throw fail("expected a filter before \(next)")
        default:
            try count(at: index)
            let word = try argument(for: "a bare word")
            return .clause(.url(try pattern(word)))
        }
    }

    // MARK: clauses

    private mutating func clause() throws(FilterError) -> CaptureFilter.Clause {
        let start = index
        try count(at: start)
        index += 1
        var name = ""
        while let c = peek, c.isLetter || c.isNumber {
            name.append(c)
            index += 1
        }
        func needs() throws(FilterError) -> (String, Int) { try (argument(for: "~" + name), lastArgumentStart) }
        switch name {
        case "all": return .all
        case "e": return .error
        case "q": return .noResponse
        case "websocket": return .websocket
        case "marked": return .marked
        case "marker": return .marker(try pattern(needs()))
        case "comment": return .comment(try pattern(needs()))
        case "replay", "replayq": return .replay
        case "replays": return .replayedResponse
        case "s": return .response
        case "a": return .asset
        case "http": return .http
        case "tcp": return .tcp
        case "udp": return .udp
        case "meta":
            throw FilterError(
                position: start + 1, message: "~meta: Busymate keeps no flow metadata; ~comment and ~marker match what a user noted")
        case "d": return .domain(try pattern(needs()))
        case "u": return .url(try pattern(needs()))
        case "m": return .method(try pattern(needs()))
        case "src": return .source(try pattern(needs()))
        case "dst": return .destination(try pattern(needs()))
        case "rule": return .rule(try pattern(needs()))
        case "h", "hq", "hs": return .header(try pattern(needs()), Self.side(name))
        case "b", "bq", "bs": return .body(try pattern(needs()), Self.side(name))
        case "t", "tq", "ts": return .contentType(try pattern(needs()), Self.side(name))
        case "c": return .status(try Self.status(needs()))
        case "tls":
            let (word, at) = try needs()
            guard let mode = CaptureFilter.TLS(rawValue: word.lowercased()) else {
                throw FilterError(position: at + 1, message: "~tls is mitm, passthrough or none, not \"\(word)\"")
            }
            return .tls(mode)
        case "device": return .device(try pattern(needs()))
        case "dns": return .dns
        case "proto":
            let (word, at) = try needs()
            guard let version = CaptureFilter.HTTPProtocol(rawValue: word.lowercased()) else {
                throw FilterError(position: at + 1, message: "~proto is h1 (HTTP/1.0 or 1.1) or h2 (HTTP/2), not \"\(word)\"")
            }
            return .proto(version)
        case "grpc": return .grpc
        case "since": return .since(try Self.time(needs(), now: now))
        case "until": return .until(try Self.time(needs(), now: now))
        case "": throw FilterError(position: start + 1, message: "~ needs a filter name (~d, ~u, ~c, ...)")
        default: throw FilterError(position: start + 1, message: "unknown filter ~\(name)")
        }
    }

    private mutating func count(at position: Int) throws(FilterError) {
        clauses += 1
        guard clauses <= Self.maxClauses else {
            throw FilterError(position: position + 1, message: "a filter has at most \(Self.maxClauses) clauses")
        }
    }

    private static func side(_ name: String) -> CaptureFilter.Side {
        name.hasSuffix("q") ? .request : name.hasSuffix("s") ? .response : .either
    }

    private var lastArgumentStart = 0

    /// A quoted string ("..." or '...', backslash escaping the quote and
    /// itself) or a run of characters up to a space or a parenthesis.
    private mutating func argument(for owner: String) throws(FilterError) -> String {
        skipSpaces()
        lastArgumentStart = index
        guard let first = peek, first != ")" else { throw fail("\(owner) needs a value") }
        if first == "\"" || first == "'" {
            index += 1
            var value = ""
            while let c = peek {
                index += 1
                if c == first { return value }
                if c == "\\", let escaped = peek, escaped == first || escaped == "\\" {
                    value.append(escaped)
                    index += 1
                } else {
                    value.append(c)
                }
            }
            throw FilterError(position: lastArgumentStart + 1, message: "this quote is never closed")
        }
        var value = ""
        while let c = peek, !c.isWhitespace, c != "(", c != ")" {
            value.append(c)
            index += 1
        }
        guard !value.isEmpty else { throw fail("\(owner) needs a value") }
        return value
    }

    /// A case-insensitive regular expression, checked now so an error points at it.
    private func pattern(_ argument: (String, Int)) throws(FilterError) -> String {
        let (text, at) = argument
        do {
            _ = try NSRegularExpression(pattern: text, options: [.caseInsensitive])
        } catch {
            throw FilterError(position: at + 1, message: "\"\(text)\" is not a valid regular expression")
        }
        return text
    }

    private func pattern(_ word: String) throws(FilterError) -> String { try pattern((word, lastArgumentStart)) }

    /// `404`, `4xx`, `500-599`.
    static func status(_ argument: (String, Int)) throws(FilterError) -> ClosedRange<Int> {
        let (text, at) = argument
        let why = FilterError(position: at + 1, message: "a status is a code (404), a class (4xx) or a range (500-599), not \"\(text)\"")
        func code(_ s: Substring) -> Int? { s.count == 3 ? Int(s).flatMap { (100...599).contains($0) ? $0 : nil } : nil }
        if let single = code(text[...]) { return single...single }
        let lower = text.lowercased()
        if lower.count == 3, lower.hasSuffix("xx"), let digit = lower.first?.wholeNumberValue, (1...5).contains(digit) {
            return (digit * 100)...(digit * 100 + 99)
        }
        let ends = text.split(separator: "-", omittingEmptySubsequences: false)
        if ends.count == 2, let low = code(ends[0]), let high = code(ends[1]), low <= high { return low...high }
        throw why
    }

    /// A duration ago (`30s`, `10m`, `2h`, `1d`, `1w`) or an ISO 8601 date or date-time.
    static func time(_ argument: (String, Int), now: Date) throws(FilterError) -> Date {
        let (text, at) = argument
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
        // Digits with an optional fraction only: Double() also takes "inf", "nan", "1e300" and hex.
        if let unit = text.last, let seconds = units[unit] {
            let number = text.dropLast()
            let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            guard !number.isEmpty, number.count <= 20, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                !parts[0].isEmpty, let amount = Double(number)
            else {
                throw FilterError(position: at + 1, message: "a duration is a number and a unit (30s, 10m, 2h, 1d, 1w), not \"\(text)\"")
            }
            guard amount * seconds <= maxAgo else {
                throw FilterError(position: at + 1, message: "\"\(text)\" is more than 100 years ago; the store keeps nothing that old")
            }
            return now.addingTimeInterval(-amount * seconds)
        }
        let refusal = FilterError(
            position: at + 1,
            message:
                "a time is a duration ago (30s, 10m, 2h, 1d, 1w) or an ISO 8601 date (2026-11-23, 2026-11-23T10:00:00Z), not \"\(text)\"")
        // ICU's date parser, behind ISO8601DateFormatter, dies of SIGFPE on a
        // fraction of 35 digits: no run of more than 9 digits (nanoseconds), ASCII only.
        var run = 0
        for byte in text.utf8 {
            guard byte < 0x80 else { throw refusal }
            run = (0x30...0x39).contains(byte) ? run + 1 : 0
            if run > 9 { throw refusal }
        }
        let full = ISO8601DateFormatter()
        full.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        day.timeZone = TimeZone.current
        if let date = full.date(from: text) ?? plain.date(from: text) ?? day.date(from: text) { return date }
        throw refusal
    }

    // MARK: characters

    private var peek: Character? { index < characters.count ? characters[index] : nil }

    private mutating func skipSpaces() {
        while let c = peek, c.isWhitespace { index += 1 }
    }

    private mutating func take(_ c: Character) -> Bool {
        skipSpaces()
        guard peek == c else { return false }
        index += 1
        return true
    }

    private func fail(_ message: String) -> FilterError {
        FilterError(position: index + 1, message: message)
    }
}
