import Foundation
import NIOCore
import NIOHTTP1
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Keeps the proxy from talking to itself: its name in `Via` (a request that
/// carries it has come round once already) and its own listening addresses
/// (a `CONNECT` to its own port would be glued to itself, each round taking
/// two more descriptors, until they run out).
final class LoopGuard: Sendable {
    static let shared = LoopGuard()

    /// The `Via` pseudonym (RFC 9110 §7.6.3): per tunnel process, so two
    /// appliances chained one after the other tell each other apart.
    let pseudonym = "busymate-" + String(format: "%08x", UInt32.random(in: 0...UInt32.max))

    private let listeners = Mutex<[SocketAddress]>([])

    func listening(on address: SocketAddress) {
        listeners.withLock { $0.append(address) }
    }

    func stopped(listening address: SocketAddress) {
        listeners.withLock { list in
            if let i = list.firstIndex(of: address) { list.remove(at: i) }
        }
    }

    /// `Via: 1.1 busymate-…` for a request received as `version`.
    func via(receivedAs version: HTTPVersion) -> String {
        // RFC 9110 §7.6.3: HTTP/2 is "2", without a minor version.
        version.major >= 2 ? "\(version.major) \(pseudonym)" : "\(version.major).\(version.minor) \(pseudonym)"
    }

    /// Whether one `Via` value names this proxy.
    func names(_ via: String) -> Bool {
        let name = pseudonym.utf8
        return via.utf8.split(separator: UInt8(ascii: ",")).contains { entry in
            entry.split(separator: UInt8(ascii: " ")).contains { $0.elementsEqual(name) }
        }
    }

    /// Whether dialling `address` would reach one of this proxy's own
    /// listeners: the same address and port, or a listener on a wildcard
    /// address and a local address with its port.
    func isOwnListener(_ address: SocketAddress) -> Bool {
        guard let port = address.port else { return false }
        let own = listeners.withLock { $0 }.filter { $0.port == port }
        guard !own.isEmpty, let ip = address.ipAddress else { return false }
        if own.contains(where: { $0.ipAddress == ip }) { return true }
        guard own.contains(where: { Self.isUnspecified($0) }) else { return false }
        return Self.isLoopbackOrUnspecified(address) || LocalAddresses.shared.current().contains(ip)
    }

    private static func isUnspecified(_ address: SocketAddress) -> Bool {
        address.ipAddress == "0.0.0.0" || address.ipAddress == "::"
    }

    private static func isLoopbackOrUnspecified(_ address: SocketAddress) -> Bool {
        guard let ip = address.ipAddress else { return false }
        return ip.hasPrefix("127.") || ip == "::1" || ip == "0.0.0.0" || ip == "::" || ip.hasPrefix("::ffff:127.")
    }

    /// The machine's own interface addresses, read now (it blocks: callers
    /// on an event loop go through `LocalAddresses`).
    static func localAddresses() -> Set<String> {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var out = Set<String>()
        var next = list
        while let entry = next {
            if let raw = entry.pointee.ifa_addr {
                switch Int32(raw.pointee.sa_family) {
                case AF_INET:
                    out.insert(SocketAddress(UnsafeRawPointer(raw).load(as: sockaddr_in.self), host: "").ipAddress ?? "")
                case AF_INET6:
                    out.insert(SocketAddress(UnsafeRawPointer(raw).load(as: sockaddr_in6.self), host: "").ipAddress ?? "")
                default: break
                }
            }
            next = entry.pointee.ifa_next
        }
        return out
    }
}
