import BusymateShared
import Testing

@testable import ProxyEngine

@Suite struct MapRemoteTests {
    private func map(_ pattern: String, _ to: String, _ originForm: String) throws -> MapRemote {
        let rule = Rule(name: "r", match: .url(try #require(URLPattern(pattern))), action: .mapRemote(to: to))
        return try #require(MapRemote(rule: rule, to: to, originForm: originForm))
    }

    @Test func schemeHostPortAndPathComeFromTheRule() throws {
        // The path below the pattern's prefix goes under the rule's path; the query stays.
        let api = try map("api.test/v1/*", "http://127.0.0.1:3000/api/", "/v1/users?page=2")
        #expect(api.target == ProxyTarget(host: "127.0.0.1", port: 3000) && !api.secure)
        #expect(api.originForm == "/api/users?page=2" && api.hostHeader == "127.0.0.1:3000")
        // No path in `to`: the request's own path.
        let keep = try map("*.test/*", "https://staging.test", "/a/b?c")
        #expect(
            keep.target == ProxyTarget(host: "staging.test", port: 443) && keep.secure && keep.originForm == "/a/b?c"
                && keep.hostHeader == "staging.test")
        // A pattern without *: one URL mapped to one URL.
        let one = try map("api.test/v1/config", "http://[::1]:8080/mock/config.json", "/v1/config?x=1")
        #expect(
            one.target == ProxyTarget(host: "::1", port: 8080) && one.originForm == "/mock/config.json?x=1"
                && one.hostHeader == "[::1]:8080")
        // The whole host.
        let all = try map("api.test/*", "http://127.0.0.1:9000/", "/")
        #expect(all.originForm == "/")
    }
}
