/// Exponential backoff with jitter: 1 s, 2 s, 4 s … up to a minute, each
/// a random half to whole of its step, so many appliances a server lost
/// at once do not come back at once.
public struct SinkBackoff: Sendable {
    public var base = 1.0
    public var cap = 60.0
    public private(set) var failures = 0

    public init(base: Double = 1, cap: Double = 60) {
        self.base = base
        self.cap = cap
    }

    public mutating func next(at least: Double? = nil) -> Double {
        failures += 1
        let step = min(cap, base * Double(1 << min(failures - 1, 16)))
        let jittered = step * Double.random(in: 0.5...1.0)
        return max(jittered, least ?? 0)
    }

    public mutating func reset() { failures = 0 }
}
