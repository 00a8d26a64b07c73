/// One URL pattern, the matcher every rule and breakpoint shares (seed 000's
/// URLPatternMatcher):
/// - a leading scheme (`https://`) is ignored, in the pattern and the URL;
/// - the host is matched as in the SSL-proxying list: exact, `*.example.com`
///   (subdomains), `*`; a port, when the pattern names one, must match too
///   (the URL's own, or its scheme's default);
/// - the path is a glob in which `*` stands for anything, `/` included;
/// - a pattern that does not end in `*` also matches its URL with a
///   trailing `/`, a `?query` or a `#fragment`.
public struct URLPattern: Sendable, Equatable {
    public let text: String
    private let host: [UInt8]
    private let port: Int?
    private let path: [UInt8]
    private let open: Bool

    /// nil, with `problem(with:)` saying why, for a pattern that cannot match.
    public init?(_ text: String) {
        guard Self.problem(with: text) == nil else { return nil }
        self.text = text
        let rest = Self.droppingScheme(text)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let (host, port) = Self.splitAuthority(String(rest[..<slash]))
        self.host = Array(SSLProxyMatcher.normalize(host).utf8)
        self.port = port
        path = Array(rest[slash...].utf8)
        open = text.hasSuffix("*")
    }

    public static func == (lhs: URLPattern, rhs: URLPattern) -> Bool { lhs.text == rhs.text }

    /// Why `text` is not a usable pattern, or nil.
    public static func problem(with text: String) -> String? {
        let rest = droppingScheme(text)
        let authority = String(rest[..<(rest.firstIndex(of: "/") ?? rest.endIndex)])
        guard !authority.isEmpty else { return "a URL pattern starts with a host (or *)" }
        if rest.contains(where: { $0 == " " || $0 == "\t" }) { return "a URL pattern has no spaces" }
        let (host, port) = splitAuthority(authority)
        // One colon outside brackets introduces a port (more are an IPv6 literal).
        let colons = authority.filter { $0 == ":" }.count
        if port == nil,
            authority.hasSuffix(":") || (colons == 1 && !authority.hasPrefix("[")) || (authority.hasPrefix("[") && authority.contains("]:"))
        {
            return "the port after the host must be a number from 1 to 65535"
        }
        return SSLProxyMatcher.problem(with: host).map { "the host: \($0)" }
    }

    /// `url` is absolute (`https://host[:port]/path?query`), as captured rows store it.
    public func matches(_ url: String) -> Bool { matches(Subject(url)) }

    /// A URL taken apart once, for matching against many patterns.
    public struct Subject: Sendable, Equatable {
        let port: Int
        let host: [UInt8]
        let path: [UInt8]

        /// Byte by byte: matching runs per request and per pattern kind, and
        /// Foundation's string search made it microseconds.
        public init(_ url: String) {
            let bytes = Array(url.utf8)
            guard bytes.allSatisfy({ $0 < 0x80 }) else {
                self.init(unicode: url)
                return
            }
            func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b + 0x20 : b }
            var start = 0
            var scheme: [UInt8] = []
            var i = 0
            while i + 2 < bytes.count {
                if bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"), bytes[i + 2] == UInt8(ascii: "/") {
                    scheme = bytes[..<i].map(lower)
                    start = i + 3
                    break
                }
                i += 1
            }
            let end =
                bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.count
            var host = bytes[start..<end]
            var explicitPort: Int?
            func port(_ digits: ArraySlice<UInt8>) -> Int? {
                guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                return (1...65535).contains(value) ? value : nil
            }
            if host.first == UInt8(ascii: "["), let close = host.firstIndex(of: UInt8(ascii: "]")) {
                let after = host[(close + 1)...]
                if after.first == UInt8(ascii: ":") { explicitPort = port(after.dropFirst()) }
                host = host[(host.startIndex + 1)..<close]
            } else if let colon = host.firstIndex(of: UInt8(ascii: ":")), host.lastIndex(of: UInt8(ascii: ":")) == colon,
                let value = port(host[(colon + 1)...])
            {
                explicitPort = value
                host = host[..<colon]
            }
            var name = host.map(lower)
            if name.last == UInt8(ascii: ".") { name.removeLast() }
            self.init(
                port: explicitPort ?? (scheme == Array("http".utf8) || scheme == Array("ws".utf8) ? 80 : 443), host: name,
                path: Array(bytes[end...]))
        }

        private init(port: Int, host: [UInt8], path: [UInt8]) {
            self.port = port
            self.host = host
            self.path = path
        }

        init(unicode url: String) {
            let scheme = url.range(of: "://").map { url[..<$0.lowerBound].lowercased() }
            let rest = URLPattern.droppingScheme(url)
            let slash = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            let (urlHost, explicitPort) = URLPattern.splitAuthority(String(rest[..<slash]))
            self.init(
                port: explicitPort ?? (scheme == "http" || scheme == "ws" ? 80 : 443), host: Array(SSLProxyMatcher.normalize(urlHost).utf8),
                path: Array(rest[slash...].utf8))
        }
    }

    public func matches(_ url: Subject) -> Bool {
        if let port, url.port != port { return false }
        guard !url.host.isEmpty, SSLProxyMatcher.glob(host, matches: url.host) else { return false }
        let full = url.path
        if Self.glob(path, matches: full) { return true }
        guard !open else { return false }
        // Closed patterns: the same URL with a trailing slash, a query or a fragment.
        var bare = full.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        if bare.count < full.count, Self.glob(path, matches: Array(bare)) { return true }
        if bare.last == UInt8(ascii: "/"), path.last != UInt8(ascii: "/") {
            bare.removeLast()
            return Self.glob(path, matches: Array(bare))
        }
        return false
    }

    private static func droppingScheme(_ text: String) -> Substring {
        guard let range = text.range(of: "://") else { return text[...] }
        return text[range.upperBound...]
    }

    /// `host`, `host:port`, `[v6]`, `[v6]:port`; a port that is not a
    /// number from 1 to 65535 is left in the host (and then refused).
    private static func splitAuthority(_ authority: String) -> (host: String, port: Int?) {
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            let host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            guard after.hasPrefix(":"), let port = portNumber(after.dropFirst()) else { return (host, nil) }
            return (host, port)
        }
        guard let colon = authority.lastIndex(of: ":"), authority.firstIndex(of: ":") == colon,
            let port = portNumber(authority[authority.index(after: colon)...])
        else { return (authority, nil) }
        return (String(authority[..<colon]), port)
    }

    /// Digits only (`Int` alone takes a sign), 1 to 65535.
    private static func portNumber(_ text: Substring) -> Int? {
        guard text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let port = Int(text), (1...65535).contains(port) else { return nil }
        return port
    }

    /// `*` stands for any run of bytes; everything else is literal (`?`
    /// starts a query in a URL, so it is no wildcard here).
    static func glob(_ pattern: [UInt8], matches text: [UInt8]) -> Bool {
        var p = 0, t = 0
        var star = -1, mark = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                mark = t
                p += 1
            } else if p < pattern.count, pattern[p] == text[t] {
                p += 1
                t += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}
