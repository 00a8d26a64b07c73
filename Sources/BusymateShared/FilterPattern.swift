import Foundation
import Synchronization

/// A filter's pattern, ready to match: a case-insensitive regular
/// expression searched anywhere in the subject, as mitmproxy's. Most
/// patterns people type are plain text (`api`, `example\.com`): those are a
/// case-insensitive substring search, many times cheaper per row than a
/// regular expression; the rest go to ICU (`NSRegularExpression`).
public struct FilterPattern: @unchecked Sendable {
    // @unchecked: NSRegularExpression is immutable once made, and safe to use from any thread.
    private enum Matcher {
        /// ASCII text, lowercased: compared byte by byte.
        case ascii([UInt8])
        case regex(NSRegularExpression)
    }

    private let matcher: Matcher

    package init(_ pattern: String) throws {
        if let literal = Self.literal(pattern) {
            matcher = .ascii(Array(literal.utf8))
        } else {
            matcher = .regex(try NSRegularExpression(pattern: pattern, options: [.caseInsensitive]))
        }
    }

    /// Plain text (no regular expression) with none of `characters` and
    /// no control character in it (what JSON would escape).
    package func isPlainText(without characters: String) -> Bool {
        guard case let .ascii(needle) = matcher else { return false }
        return !needle.contains { $0 < 0x20 || $0 == 0x7F || characters.utf8.contains($0) }
    }

    /// How long one regular expression may run over one value. ICU
    /// backtracks: `(a+)+b` over thirty `a`s runs for seconds, and a
    /// filter runs it over every row.
    public static let timeLimit: Duration = .milliseconds(500)

    /// Throws `FilterPatternTimeout` when a regular expression runs past
    /// `limit` on `text` (ICU calls back every few thousand steps).
    package func matches(_ text: String, within limit: Duration = timeLimit) throws(FilterPatternTimeout) -> Bool {
        try matches(text, until: ContinuousClock.now.advanced(by: limit), limit: limit)
    }

    /// The same, against a deadline shared by several values (a rule's
    /// filter over one request); `limit` is what the error reports.
    package func matches(_ text: String, until deadline: ContinuousClock.Instant, limit: Duration) throws(FilterPatternTimeout) -> Bool {
        switch matcher {
        case let .ascii(needle):
            var text = text
            return text.withUTF8 { Self.contains($0, needle) }
        case let .regex(regex):
            let clock = ContinuousClock()
            guard clock.now < deadline else { throw FilterPatternTimeout(pattern: regex.pattern, limit: limit) }
            var found = false
            var timedOut = false
            regex.enumerateMatches(in: text, options: [.reportProgress], range: NSRange(text.startIndex..., in: text)) { match, _, stop in
                if match != nil {
                    found = true
                    stop.pointee = true
                } else if clock.now >= deadline {
                    timedOut = true
                    stop.pointee = true
                }
            }
            if timedOut && !found { throw FilterPatternTimeout(pattern: regex.pattern, limit: limit) }
            return found
        }
    }

    /// The text a pattern stands for when it has no operator in it (an
    /// escaped punctuation character stands for itself), lowercased; nil
    /// when it needs a regular expression, or is not ASCII.
    static func literal(_ pattern: String) -> String? {
        var out = ""
        var escaped = false
        for scalar in pattern.unicodeScalars {
            guard scalar.isASCII else { return nil }
            let c = Character(scalar)
            if escaped {
                // \d, \w, \b, \n...: classes and anchors, not text.
                guard c.isPunctuation || c.isSymbol || c == " " else { return nil }
                out.append(c)
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else if ".^$*+?()[]{}|".contains(c) {
                return nil
            } else {
                out.append(c)
            }
        }
        return escaped || out.isEmpty ? nil : out.lowercased()
    }

    /// Whether `text` contains `needle`, ignoring ASCII case.
    package static func mentions(_ text: String, _ needle: String) -> Bool {
        var text = text
        let wanted = Array(needle.lowercased().utf8)
        return text.withUTF8 { contains($0, wanted) }
    }

    /// Whether `haystack`, ASCII-lowercased, contains `needle` (lowercase).
    private static func contains(_ haystack: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        let n = needle.count
        guard n <= haystack.count, let first = needle.first else { return n == 0 }
        @inline(__always) func lower(_ b: UInt8) -> UInt8 { b &- 65 < 26 ? b | 0x20 : b }
        var i = 0
        let last = haystack.count - n
        while i <= last {
            if lower(haystack[i]) == first {
                var j = 1
                while j < n && lower(haystack[i + j]) == needle[j] { j += 1 }
                if j == n { return true }
            }
            i += 1
        }
        return false
    }

    /// Patterns made once per text, for the SQL functions (rows are many, patterns few).
    private static let cache = Mutex<[String: FilterPattern]>([:])
    /// Emptied whole when full: a store's filters are a few patterns at a time.
    private static let cacheSize = 256

    package static func cached(_ pattern: String) -> FilterPattern? {
        if let known = cache.withLock({ $0[pattern] }) { return known }
        guard let made = try? FilterPattern(pattern) else { return nil }
        cache.withLock { table in
            if table.count > cacheSize { table.removeAll() }
            table[pattern] = made
        }
        return made
    }
}
