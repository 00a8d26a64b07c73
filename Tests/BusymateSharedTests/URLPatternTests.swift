import Testing

@testable import BusymateShared

@Suite struct URLPatternTests {
    /// (pattern, URL, matches?), one clause of the semantics each.
    static let cases: [(String, String, Bool)] = [
        // The scheme is ignored, in the pattern and in the URL.
        ("api.example.com/users", "https://api.example.com/users", true),
        ("https://api.example.com/users", "http://api.example.com/users", true),
        ("http://api.example.com/users", "https://api.example.com/users", true),
        // Hosts: exact, case-insensitive; *.x.com is subdomains (not the apex); * is any host.
        ("API.Example.com/users", "https://api.example.COM/users", true),
        ("api.example.com/users", "https://www.example.com/users", false),
        ("*.example.com/users", "https://api.example.com/users", true),
        ("*.example.com/users", "https://a.b.example.com/users", true),
        ("*.example.com/users", "https://example.com/users", false),
        ("*.example.com/users", "https://badexample.com/users", false),
        ("*/health", "https://anything.test/health", true),
        // Ports: none in the pattern means any; a named one must match, the scheme's default counting.
        ("api.example.com/x", "https://api.example.com:8443/x", true),
        ("api.example.com:8443/x", "https://api.example.com:8443/x", true),
        ("api.example.com:8443/x", "https://api.example.com/x", false),
        ("api.example.com:443/x", "https://api.example.com/x", true),
        ("api.example.com:80/x", "http://api.example.com/x", true),
        ("[::1]:8080/x", "http://[::1]:8080/x", true),
        ("[::1]/x", "http://[::1]:8080/x", true),
        // Paths: * anywhere, across slashes; everything else literal, case-sensitive.
        ("api.example.com/v1/*", "https://api.example.com/v1/users/9/photos", true),
        ("api.example.com/v1/*/photos", "https://api.example.com/v1/users/9/photos", true),
        ("api.example.com/v1/*/photos", "https://api.example.com/v2/users/9/photos", false),
        ("api.example.com/*.png", "https://api.example.com/img/logo.png", true),
        ("api.example.com/Users", "https://api.example.com/users", false),
        ("api.example.com/a?b", "https://api.example.com/aXb", false),
        ("api.example.com/v1*", "https://api.example.com/v1?page=2", true),
        // A pattern not ending in * also matches with a trailing slash, a query or a fragment…
        ("api.example.com/users", "https://api.example.com/users/", true),
        ("api.example.com/users", "https://api.example.com/users?page=2", true),
        ("api.example.com/users", "https://api.example.com/users#top", true),
        ("api.example.com/users", "https://api.example.com/users/?page=2", true),
        ("api.example.com", "https://api.example.com/", true),
        ("api.example.com", "https://api.example.com", true),
        // …but not with more path.
        ("api.example.com/users", "https://api.example.com/users/9", false),
        ("api.example.com/users", "https://api.example.com/usersX", false),
        ("api.example.com", "https://api.example.com/users", false),
        // A query in the pattern is literal text to match.
        ("api.example.com/search?q=*", "https://api.example.com/search?q=swift", true),
        ("api.example.com/search?q=a", "https://api.example.com/search?q=b", false),
    ]

    @Test(arguments: cases)
    func matches(_ pattern: String, _ url: String, _ expected: Bool) throws {
        let compiled = try #require(URLPattern(pattern), "\(URLPattern.problem(with: pattern) ?? "")")
        #expect(compiled.matches(url) == expected, "\(pattern) ~ \(url)")
    }

    @Test func badPatternsSayWhy() {
        let bad: [(String, String)] = [
            ("", "starts with a host"),
            ("/users", "starts with a host"),
            ("https:///users", "starts with a host"),
            ("api.example.com:http/x", "port"),
            ("api.example.com:0/x", "port"),
            ("api.example.com:/x", "port"),
            ("[::1]:abc/x", "port"),
            ("api example.com/x", "no spaces"),
            ("api.exa$mple.com/x", "the host"),
        ]
        for (pattern, why) in bad {
            #expect(URLPattern(pattern) == nil, "\(pattern)")
            #expect(
                URLPattern.problem(with: pattern)?.contains(why) == true, "\(pattern): \(URLPattern.problem(with: pattern) ?? "no problem")"
            )
        }
        #expect(URLPattern.problem(with: "*.example.com/v1/*") == nil)
    }
}

extension URLPatternTests {
    /// The byte-level reading of a URL agrees with the string-level one it replaced.
    @Test func theFastURLReadingAgreesWithTheStringOne() {
        let edges = [
            "HTTP://A.Test./x", "http://a.test:99999/x", "http://a.test:/x", "http://a.test:+80/x", "http://a.test:000080/x",
            "http://a.test:99999999999999/x", "http://[::1/x", "http://[::1]:0/x",
            "ws://a.test/x", "WSS://a.test:443", "a.test/no/scheme", "http://a.test?q#f", "http://user@a.test:8080/p", "http://1:2:3/x", "",
        ]
        for url in Self.cases.map(\.1) + edges {
            #expect(URLPattern.Subject(url) == URLPattern.Subject(unicode: url), "\(url)")
        }
    }
}
