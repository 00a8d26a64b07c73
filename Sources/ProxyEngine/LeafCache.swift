/// A small least-recently-used map; callers hold the lock around it.
struct LeafCache<Value> {
    private var entries: [String: (value: Value, tick: UInt64)] = [:]
    private var tick: UInt64 = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    mutating func get(_ key: String) -> Value? {
        guard let entry = entries[key] else { return nil }
        tick += 1
        entries[key] = (entry.value, tick)
        return entry.value
    }

    mutating func set(_ key: String, _ value: Value) {
        tick += 1
        entries[key] = (value, tick)
        if entries.count > capacity {
            // Evict the oldest eighth at once, so eviction stays rare.
            let victims = entries.sorted { $0.value.tick < $1.value.tick }.prefix(max(1, capacity / 8))
            for victim in victims { entries[victim.key] = nil }
        }
    }

    mutating func removeAll() { entries.removeAll() }
}
