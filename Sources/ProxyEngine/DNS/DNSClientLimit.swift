import Synchronization

/// Queries one DNS client may send: a token bucket per address (`rate` a
/// second, `burst` at once). A flood from one client is refused, neither
/// forwarded nor recorded, and the others are served as before.
final class DNSClientLimit: Sendable {
    private struct Bucket {
        var tokens: Double
        var at: Double
    }

    let rate: Double
    let burst: Double
    /// Clients remembered at most: past this, buckets that have filled up
    /// again are forgotten (they would start full anyway).
    static let maxClients = 4_096
    private let buckets = Mutex<[String: Bucket]>([:])

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// Whether `client` may send one more query at `now` (monotonic seconds).
    func admit(_ client: String, now: Double) -> Bool {
        buckets.withLock { buckets in
            var bucket = buckets[client].map { refilled($0, now) } ?? Bucket(tokens: burst, at: now)
            let admitted = bucket.tokens >= 1
            if admitted { bucket.tokens -= 1 }
            if buckets[client] == nil, buckets.count >= Self.maxClients {
                buckets = buckets.filter { refilled($0.value, now).tokens < burst }
                // Thousands of clients all busy: start over rather than grow.
                if buckets.count >= Self.maxClients { buckets.removeAll() }
            }
            buckets[client] = bucket
            return admitted
        }
    }

    private func refilled(_ bucket: Bucket, _ now: Double) -> Bucket {
        Bucket(tokens: min(burst, bucket.tokens + max(0, now - bucket.at) * rate), at: now)
    }
}
