import Testing

@testable import BusymateShared

@Suite struct SSLProxyMatcherTests {
    @Test(arguments: [
        // pattern, host, expected
        ("api.example.com", "api.example.com", true),
        ("api.example.com", "API.Example.COM.", true),
        ("api.example.com", "example.com", false),
        ("api.example.com", "x.api.example.com", false),
        ("*.example.com", "api.example.com", true),
        ("*.example.com", "a.b.example.com", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "badexample.com", false),
        ("*", "anything.at.all", true),
        ("*", "10.0.0.1", true),
        ("api-?.example.com", "api-2.example.com", true),
        ("api-?.example.com", "api-22.example.com", false),
        ("*.internal.*", "db.internal.corp", true),
        ("[::1]", "::1", true),
        // A `*` in the name is matched by the pattern's wildcard, not used up as a literal (found by fuzz-url-pattern).
        ("*", "*x", true),
        ("**e", "*/e", true),
        ("*.example.com", "*.example.com", true),
    ])
    func include(pattern: String, host: String, expected: Bool) {
        #expect(SSLProxyMatcher(include: [pattern], exclude: []).shouldIntercept(host: host) == expected)
    }

    @Test func excludeWinsOverInclude() {
        let m = SSLProxyMatcher(include: ["*.example.com", "*"], exclude: ["pinned.example.com"])
        #expect(m.shouldIntercept(host: "api.example.com"))
        #expect(!m.shouldIntercept(host: "pinned.example.com"))
        #expect(m.shouldIntercept(host: "other.org"))
    }

    @Test func emptyListInterceptsNothing() {
        #expect(!SSLProxyMatcher(include: [], exclude: []).shouldIntercept(host: "example.com"))
        #expect(!SSLProxyMatcher(include: ["*"], exclude: []).shouldIntercept(host: ""))
    }

    @Test func badPatternsAreExplained() {
        #expect(SSLProxyMatcher.problem(with: "https://example.com") != nil)
        #expect(SSLProxyMatcher.problem(with: "example.com/path") != nil)
        #expect(SSLProxyMatcher.problem(with: "") != nil)
        #expect(SSLProxyMatcher.problem(with: "exa mple.com") != nil)
        #expect(SSLProxyMatcher.problem(with: "*.example.com") == nil)
    }
}
