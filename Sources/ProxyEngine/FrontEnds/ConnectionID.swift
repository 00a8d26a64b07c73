import Foundation
import Synchronization

/// Names one client connection in its rows (`connection_id`), so the page
/// can group an HTTP/2 connection's streams and a kept-alive connection's
/// requests: the tunnel's start time and a counter, both in base 36.
enum ConnectionID {
    private static let start = String(UInt64(Date().timeIntervalSince1970 * 1000), radix: 36)
    private static let counter = Atomic<UInt64>(0)

    static func make() -> String {
        let n = counter.add(1, ordering: .relaxed).newValue
        return "\(start)-\(String(n, radix: 36))"
    }
}
