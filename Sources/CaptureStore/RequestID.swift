import Foundation
import Synchronization

/// Request ids are UUIDv7 (RFC 9562): a millisecond timestamp, then random
/// bits. New ids sort after older ones, so the unique index on `request_id`
/// grows at its end; random v4 ids touched a random index page per insert,
/// and the store wrote megabytes of WAL per batch.
public enum RequestID {
    public static func make(at date: Date = Date()) -> String {
        make(milliseconds: UInt64(max(0, date.timeIntervalSince1970 * 1000)), random: nextRandom(), nextRandom())
    }

    /// SplitMix64 over a counter seeded once by the system: ids must not
    /// collide, they are no secret, and a getrandom call per id showed in
    /// the profile.
    private static let counter = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    static func nextRandom() -> UInt64 {
        var z = counter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    static func make(milliseconds: UInt64, random a: UInt64, _ b: UInt64) -> String {
        // 48 bits of time, version 7, 12 random bits; variant 10, 62 random bits.
        let high = (milliseconds & 0xFFFF_FFFF_FFFF) << 16 | 0x7000 | (a & 0x0FFF)
        let low = 0x8000_0000_0000_0000 | (b & 0x3FFF_FFFF_FFFF_FFFF)
        return String(unsafeUninitializedCapacity: 36) { out in
            var at = 0
            for i in 0..<32 {
                if at == 8 || at == 13 || at == 18 || at == 23 {
                    out[at] = UInt8(ascii: "-")
                    at += 1
                }
                let word = i < 16 ? high : low
                let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (i % 16))) & 0xF
                out[at] = nibble < 10 ? nibble + UInt8(ascii: "0") : nibble - 10 + UInt8(ascii: "a")
                at += 1
            }
            return at
        }
    }
}
