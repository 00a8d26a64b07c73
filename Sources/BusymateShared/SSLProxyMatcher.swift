/// Decides which hosts are intercepted. Patterns are case-insensitive host
/// globs: `api.example.com` (exact), `*.example.com` (any subdomain, not the
/// apex), `*` (every host); `?` stands for one character. An exclude match
/// wins over an include match, as in Proxyman's SSL-proxying list.
public struct SSLProxyMatcher: Sendable, Equatable {
    public let include: [String]
    public let exclude: [String]
    private let includeGlobs: [[UInt8]]
    private let excludeGlobs: [[UInt8]]

    public init(include: [String], exclude: [String]) {
        self.include = include
        self.exclude = exclude
        includeGlobs = include.map { Array(Self.normalize($0).utf8) }
        excludeGlobs = exclude.map { Array(Self.normalize($0).utf8) }
    }

    public static func == (lhs: SSLProxyMatcher, rhs: SSLProxyMatcher) -> Bool {
        lhs.include == rhs.include && lhs.exclude == rhs.exclude
    }

    public func shouldIntercept(host: String) -> Bool {
        let name = Array(Self.normalize(host).utf8)
        guard !name.isEmpty else { return false }
        return includeGlobs.contains { Self.glob($0, matches: name) }
            && !excludeGlobs.contains { Self.glob($0, matches: name) }
    }

    /// Why `pattern` cannot be a host pattern, or nil when it can.
    public static func problem(with pattern: String) -> String? {
        if pattern.isEmpty { return "an empty pattern matches nothing" }
        if pattern.contains("://") { return "write the host only, without a scheme" }
        if pattern.contains("/") { return "write the host only, without a path" }
        let allowed = pattern.unicodeScalars.allSatisfy {
            $0.properties.isAlphabetic || ("0"..."9").contains($0) || "-._*?:[]".unicodeScalars.contains($0)
        }
        return allowed ? nil : "only host names, IP addresses and the wildcards * and ? are allowed"
    }

    static func normalize(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasSuffix(".") { h.removeLast() }
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        return h
    }

    /// Iterative glob with single backtrack point: linear for these patterns.
    static func glob(_ pattern: [UInt8], matches name: [UInt8]) -> Bool {
        var p = 0, n = 0
        var star = -1, mark = 0
        while n < name.count {
            // The wildcard first: a `*` in the name must not use it up as a literal.
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                mark = n
                p += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == name[n] {
                p += 1
                n += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                n = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}
