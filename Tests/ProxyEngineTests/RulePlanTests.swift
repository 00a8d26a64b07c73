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
        let rules = try engine("""
            {"name": "off", "enabled": false, "match": "*/*", "action": "block"},
            {"name": "mock", "match": "api.test/v1/*", "action": "map_local", "file": "/srv/mock.json"},
            {"name": "spoof", "match": "*.test/*", "action": "host_override", "address": "127.0.0.1"},
            {"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}},
            {"name": "trace2", "match": "*/*", "action": "headers", "request": {"add": {"X-Two": "1"}}},
            {"name": "ads", "match": "ads.test/*", "action": "block", "status": 410}
            """)
        // A block: nothing else.
        let blocked = rules.plan(for: "https://ads.test/banner.js")
        #expect(blocked.block?.name == "ads" && blocked.mapLocal == nil && blocked.requestEdits == nil && blocked.applied.isEmpty)
        // A local answer: no dialling, but headers still apply; the first headers rule only.
        let local = rules.plan(for: "https://api.test/v1/config")
        #expect(local.mapLocal?.name == "mock" && local.hostOverride == nil && local.applied == ["trace"])
        #expect(local.requestEdits?.add.map(\.0) == ["X-Trace"])
        // Otherwise: dial the override, edit headers.
        let other = rules.plan(for: "https://www.test/")
        #expect(other.block == nil && other.mapLocal == nil && other.hostOverride == "127.0.0.1" && other.applied == ["spoof", "trace"])
        // No rules: an empty plan, and the engine says so before any URL is built.
        let none = RuleEngine()
        #expect(none.isEmpty && none.plan(for: "http://x.test/").applied.isEmpty)
        // Disabled rules never apply, and a settings change replaces them all.
        rules.apply(try AppSettings.decode(#"{"rules": [{"name": "off", "enabled": false, "match": "*/*", "action": "block"}]}"#).settings)
        #expect(rules.isEmpty)
    }
}
