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
