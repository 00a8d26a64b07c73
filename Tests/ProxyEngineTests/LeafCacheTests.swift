import Testing

@testable import ProxyEngine

@Suite struct LeafCacheTests {
    @Test func theLeastRecentlyUsedGoFirstAndAGetCountsAsUse() {
        var cache = LeafCache<Int>(capacity: 8)
        for i in 0..<8 { cache.set("h\(i)", i) }
        // h0 is used: h1 is now the oldest.
        #expect(cache.get("h0") == 0)
        cache.set("h8", 8)
        // Over capacity: the oldest eighth (one) goes.
        #expect(cache.count == 8)
        #expect(cache.get("h1") == nil)
        #expect(cache.get("h0") == 0 && cache.get("h8") == 8)
        // Setting a key again replaces its value and refreshes it.
        cache.set("h2", 20)
        cache.set("h9", 9)
        #expect(cache.get("h2") == 20)
        #expect(cache.get("h3") == nil)
    }
}
