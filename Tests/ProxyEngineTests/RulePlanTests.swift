import BusymateShared
import Testing

@testable import ProxyEngine

@Suite struct RulePlanTests {
    private func engine(_ json: String) throws -> RuleEngine {
        let engine = RuleEngine()
        engine.apply(try AppSettings.decode("{\"rules\": [\(json)]}").settings)
        return engine
    }

    @Test func theFirstMatchOfEachKindAppliesAndABlockEndsIt() throws {
        let rules = try engine(
            """
            {"name": "off", "enabled": false, "match": "*/*", "action": "block"},
            {"name": "mock", "match": "api.test/v1/*", "action": "map_local", "file": "/srv/mock.json"},
            {"name": "spoof", "match": "*.test/*", "action": "host_override", "address": "127.0.0.1"},
            {"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}},
            {"name": "trace2", "match": "*/*", "action": "headers", "request": {"add": {"X-Two": "1"}}},
            {"name": "ads", "match": "ads.test/*", "action": "block", "status": 410}
            """)
        // A block: nothing else.
        let blocked = rules.plan(for: "https://ads.test/banner.js", exchange: nil)
        #expect(blocked.block?.name == "ads" && blocked.mapLocal == nil && blocked.requestEdits == nil && blocked.applied.isEmpty)
        // A local answer: no dialling, but headers still apply; the first headers rule only.
        let local = rules.plan(for: "https://api.test/v1/config", exchange: nil)
        #expect(local.mapLocal?.name == "mock" && local.hostOverride == nil && local.applied == ["trace"])
        #expect(local.requestEdits?.add.map(\.0) == ["X-Trace"])
        // Otherwise: dial the override, edit headers.
        let other = rules.plan(for: "https://www.test/", exchange: nil)
        #expect(other.block == nil && other.mapLocal == nil && other.hostOverride == "127.0.0.1" && other.applied == ["spoof", "trace"])
        // No rules: an empty plan, and the engine says so before any URL is built.
        let none = RuleEngine()
        #expect(none.isEmpty && none.plan(for: "http://x.test/", exchange: nil).applied.isEmpty)
        // Disabled rules never apply, and a settings change replaces them all.
        rules.apply(try AppSettings.decode(#"{"rules": [{"name": "off", "enabled": false, "match": "*/*", "action": "block"}]}"#).settings)
        #expect(rules.isEmpty)
    }

    private func request(_ url: String, method: String = "GET", headers: [(String, String)] = []) -> FilterSubject {
        var exchange = FilterSubject(url: url, method: method)
        exchange.requestHeaders = headers
        return exchange
    }

    @Test func filterRulesMatchTheRequestBesideURLPatterns() throws {
        let rules = try engine(
            """
            {"name": "beta", "match": "~hq \\"x-beta: 1\\" & ~d ^api\\\\.test$", "action": "block", "status": 451},
            {"name": "posts", "match": "~m POST & !~u /health", "action": "headers", "request": {"add": {"X-Posted": "1"}}},
            {"name": "glob", "match": "*.test/*", "action": "headers", "request": {"add": {"X-Glob": "1"}}}
            """)
        #expect(rules.snapshot.usesFilters && !rules.snapshot.choosesAtResponse)
        let url = "https://api.test/v1/items"
        #expect(rules.plan(for: url, exchange: request(url, headers: [("X-Beta", "1")])).block?.name == "beta")
        // Another host, or no header: not blocked.
        #expect(rules.plan(for: "https://www.test/", exchange: request("https://www.test/", headers: [("X-Beta", "1")])).block == nil)
        let get = rules.plan(for: url, exchange: request(url))
        #expect(get.block == nil && get.applied == ["glob"])
        let post = rules.plan(for: url, exchange: request(url, method: "POST"))
        #expect(post.applied == ["posts"] && post.requestEdits?.add.map(\.0) == ["X-Posted"])
        #expect(
            rules.plan(for: "https://api.test/health", exchange: request("https://api.test/health", method: "POST")).applied == ["glob"])
        // Without the exchange described, a filter rule matches nothing (URL patterns still do).
        #expect(rules.plan(for: url, exchange: nil).applied == ["glob"])
    }

    @Test func aHeadersRuleThatReadsTheResponseIsChosenWhenItComes() throws {
        let rules = try engine(
            """
            {"name": "json", "match": "~ts json", "action": "headers", "response": {"set": {"X-Json": "1"}}},
            {"name": "all", "match": "*/*", "action": "headers", "request": {"add": {"X-All": "1"}}, "response": {"add": {"X-All": "1"}}}
            """)
        #expect(rules.snapshot.choosesAtResponse)
        let url = "https://api.test/data"
        // At the request, the filter sees no response: the URL rule's request edits apply, its response edits wait.
        let plan = rules.plan(for: url, exchange: request(url), responseLater: true)
        #expect(plan.applied == ["all"] && plan.requestEdits?.add.map(\.0) == ["X-All"] && plan.responseEdits == nil)
        var json = request(url)
        json.status = 200
        json.responseHeaders = [("Content-Type", "application/json")]
        #expect(rules.responseRule(for: json).rule?.name == "json")
        var text = json
        text.responseHeaders = [("Content-Type", "text/html")]
        #expect(rules.responseRule(for: text).rule?.name == "all")
    }

    @Test func aRegularExpressionThatBacktracksIsNoMatchNotAStall() throws {
        let rules = try engine(#"{"name": "slow", "match": "~u \"(a+)+b\"", "action": "block"}"#)
        let url = "https://x.test/" + String(repeating: "a", count: 40)
        let clock = ContinuousClock()
        let start = clock.now
        let plan = rules.plan(for: url, exchange: request(url))
        #expect(plan.block == nil && plan.timedOut == ["slow"])
        // The limit is RuleMatch.timeLimit per value; the URL is tried as sent only (nothing to decode).
        #expect(clock.now - start < .seconds(2))
    }
}
