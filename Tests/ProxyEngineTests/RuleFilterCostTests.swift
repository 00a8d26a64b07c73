import BusymateShared
import Testing
@testable import ProxyEngine

/// Review (helper R): what one request costs the event loop with a filter
/// rule. README: "a regular expression that runs past 20 ms on one value
/// ... does not match"; the limit is per value and the first value past it
/// ends the match, but values just under it add up: a request with many
/// headers stalls its loop (and, since the rules are matched inside the
/// engine's Mutex, every other loop's requests) for up to headers × 20 ms.
/// FAILS on the code under review.
@Suite struct RuleFilterCostTests {
    @Test func aBacktrackingHeaderFilterCostsOneRequestAtMostAFewTimesTheLimit() throws {
        let rules = RuleEngine()
        rules.apply(try AppSettings.decode(#"{"rules": [{"name": "slow", "match": "~hq \"(a+)+b\"", "action": "block"}]}"#).settings)
        let url = "https://x.test/"
        var exchange = FilterSubject(url: url)
        // 100 request headers, each with 16 `a`s: a few ms each, under the
        // 20 ms limit, so none stops the match (one past it would end it at once).
        exchange.requestHeaders = (0..<100).map { ("X-H\($0)", String(repeating: "a", count: 16)) }
        let clock = ContinuousClock()
        let start = clock.now
        #expect(rules.plan(for: url, exchange: exchange).block == nil)
        let took = clock.now - start
        #expect(took < .milliseconds(200), "one request held its event loop (and the rules' lock) for \(took)")
    }
}

/// Review (helper R): the rules' patterns live in `FilterPattern`'s shared
/// cache, which is emptied whole past 256 patterns: with more distinct
/// patterns than that in the rules, every request compiles each regular
/// expression again, on the event loop. FAILS on the code under review.
@Suite struct RulePatternCacheTests {
    private func perRequest(rules count: Int) throws -> Duration {
        let rules = RuleEngine()
        let list = (0..<count).map { #"{"name": "r\#($0)", "match": "~d ^h\#($0)\\\\.test$", "action": "block"}"# }.joined(separator: ",")
        rules.apply(try AppSettings.decode("{\"rules\": [\(list)]}").settings)
        let url = "https://other.test/"
        let exchange = FilterSubject(url: url)
        _ = rules.plan(for: url, exchange: exchange)
        // The best of five rounds: what the rules cost, not the machine's other work.
        let clock = ContinuousClock()
        var best = Duration.seconds(60)
        for _ in 0..<5 {
            let start = clock.now
            for _ in 0..<20 { _ = rules.plan(for: url, exchange: exchange) }
            best = min(best, (clock.now - start) / 20)
        }
        return best
    }

    @Test func aRequestCostsAboutTheSameWith250And300FilterRules() throws {
        let few = try perRequest(rules: 250)
        let many = try perRequest(rules: 300)
        // 300 rules should cost about 1.2 times 250 rules; give it 1.7 (past 256 patterns it is over 2).
        #expect(many < few * 1.7, "250 rules: \(few) a request; 300 rules: \(many)")
    }
}
