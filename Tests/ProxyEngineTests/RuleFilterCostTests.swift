import BusymateShared
import Testing

@testable import ProxyEngine

/// What one request costs the event loop with a filter rule: the 20 ms
/// budget is the whole request's, not each value's (100 headers each just
/// under it once held a loop, and every other loop's rule checks, for
/// half a second). The bound is ten times the budget: a stall guard, not
/// a speed measurement.
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

/// A rule's regular expressions are compiled when settings are read and
/// kept with the rule, not looked up in the store's shared pattern cache
/// (which is emptied whole past 256 patterns): 300 filter rules compile
/// nothing per request.
@Suite struct RulePatternCacheTests {
    @Test func eachFilterRuleCarriesItsCompiledPatterns() throws {
        let list = (0..<300).map { #"{"name": "r\#($0)", "match": "~d ^h\#($0)\\.test$ & ~hq \"x-\#($0): 1\"", "action": "block"}"# }
        let rules = try AppSettings.decode("{\"rules\": [\(list.joined(separator: ","))]}").settings.rules
        #expect(rules.count == 300)
        for (i, rule) in rules.enumerated() {
            guard case let .filter(_, _, patterns) = rule.match else {
                Issue.record("rule \(i) is not a filter")
                continue
            }
            #expect(Set(patterns.keys) == ["^h\(i)\\.test$", "x-\(i): 1"], "\(patterns.keys)")
        }
    }
}
