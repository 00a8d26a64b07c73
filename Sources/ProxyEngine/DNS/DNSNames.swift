import Synchronization

/// Names the DNS forwarder saw answered, by client and address: a
/// transparent connection with no SNI and no Host is labelled with the name
/// its own client looked up (the address alone says little; another
/// device's answers do not relabel it). Bounded; entries live for the
/// answer's TTL, at least a minute.
public final class DNSNames: Sendable {
    private struct Entry {
        var name: String
        var until: Double
    }

    private let table = Mutex([String: Entry]())
    static let capacity = 16_384

    public init() {}

    func learn(address: String, name: String, ttl: UInt32, client: String, now: Double = DeviceRegistry.monotonic()) {
        let until = now + Double(max(60, min(ttl, 86_400)))
        let address = Self.key(client: client, address: address)
        table.withLock { t in
            if t[address] == nil, t.count >= Self.capacity {
                // Full: drop the expired, else the soonest to expire.
                let expired = t.filter { $0.value.until <= now }.map(\.key)
                if !expired.isEmpty {
                    for key in expired { t[key] = nil }
                } else if let soonest = t.min(by: { $0.value.until < $1.value.until })?.key {
                    t[soonest] = nil
                }
            }
            t[address] = Entry(name: name, until: until)
        }
    }

    func name(for address: String, client: String, now: Double = DeviceRegistry.monotonic()) -> String? {
        let key = Self.key(client: client, address: address)
        return table.withLock { t in
            guard let entry = t[key], entry.until > now else { return nil }
            return entry.name
        }
    }

    private static func key(client: String, address: String) -> String {
        DeviceRegistry.normalized(client) + " " + DeviceRegistry.normalized(address)
    }
}
