import OrderedCollections

/// A small least-recently-used map (swift-collections' `OrderedDictionary`,
/// oldest first); callers hold the lock around it.
struct LeafCache<Value> {
    private var entries: OrderedDictionary<String, Value> = [:]
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    mutating func get(_ key: String) -> Value? {
        guard let index = entries.index(forKey: key) else { return nil }
        // Used: to the young end.
        let (key, value) = entries.remove(at: index)
        entries[key] = value
        return value
    }

    mutating func set(_ key: String, _ value: Value) {
        entries.removeValue(forKey: key)
        entries[key] = value
        if entries.count > capacity {
            // Evict the oldest eighth at once, so eviction stays rare.
            entries.removeFirst(min(entries.count, max(1, capacity / 8)))
        }
    }

    mutating func removeAll() { entries.removeAll() }
}
