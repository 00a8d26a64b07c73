import BusymateShared
import Foundation
import Logging
import NIOCore
import Synchronization

/// Who may connect, who each client is, and which devices are online: the
/// tunnel's view of devices (the seed's port pool, IP whitelist and
/// per-device presence). Touched on the event loops; swept by the status
/// tick, which posts and logs presence changes.
public final class DeviceRegistry: Sendable {
    public struct PresenceChange: Sendable, Equatable {
        public var device: String
        public var online: Bool
        public var source: String?
    }

    private struct Seen {
        var address: String
        var source: String
        var at: Double
        var wall: Date
        /// When transparent traffic last came from it: it outranks the
        /// proxy, as the seed's VPN outranks PAC.
        var transparentAt: Double?
        /// When it first completed an intercepted handshake (it trusts the CA).
        var trustedAt: Date?
    }

    private struct State {
        var access = AppSettings.Access()
        var byAddress: [String: String] = [:]
        var ports: [String: Int] = [:]
        var idle: Double = 90
        var seen: [String: Seen] = [:]
        var reportedOnline: Set<String> = []
        var refused = 0
        var lastRefusalLog: Double = -.infinity
        var unsaidRefusals = 0
        var transparentSeenAt: Double?
        var proxySeenAt: Double?
        /// Enrolled devices (not revoked) by name: the address their link admitted.
        var enrolled: [String: String] = [:]
        /// When a renewal was last handed out per address: at most one per step, written or not.
        var renewalAsked: [String: Double] = [:]
    }

    private let state = Mutex(State())
    private let logger = Logger(label: "busymate.devices")
    /// At most this many unnamed clients are remembered (the oldest go).
    static let maxClients = 4_096

    /// This machine's addresses: their clients are admitted.
    private let localAddresses: LocalAddresses

    public init(localAddresses: LocalAddresses = .shared) {
        self.localAddresses = localAddresses
    }

    public func apply(_ settings: AppSettings) {
        state.withLock { s in
            s.access = settings.access
            s.idle = settings.devices.idleSeconds
            s.byAddress = [:]
            s.ports = [:]
            s.enrolled = [:]
            for device in settings.devices.list {
                if let enrolment = device.enrolment, !enrolment.revoked, let by = enrolment.redeemedBy {
                    s.enrolled[device.name] = IPAddressText.host(by)
                }
                if let address = device.address { s.byAddress[Self.normalized(address)] = device.name }
                if let port = device.port { s.ports[device.name] = port }
            }
            // A device removed from the list is forgotten (clients seen by address stay).
            let named = Set(settings.devices.list.map(\.name))
            for name in s.seen.keys where !named.contains(name) && !IPAddressText.isLiteral(name) {
                s.seen[name] = nil
                s.reportedOnline.remove(name)
            }
        }
    }

    // MARK: access

    /// How a client got in: for good (loopback, this machine, `access.allow`)
    /// or by a grant, until it ends.
    enum Admission: Equatable {
        case refused
        case admitted
        case granted(until: Date)
    }

    /// Whether `remote` may use a listener bound on `local` (no open proxy):
    /// a loopback listener takes only local clients anyway; any other takes
    /// loopback, this machine's own addresses, `access.allow` and grants.
    /// A refusal is counted and logged (at most once per 10 s).
    func admits(_ remote: SocketAddress?, listenerIsLoopback: Bool, now: Double = monotonic()) -> Bool {
        admission(remote, listenerIsLoopback: listenerIsLoopback, now: now) != .refused
    }

    /// `admits`, saying whether only a grant let the client in.
    func admission(_ remote: SocketAddress?, listenerIsLoopback: Bool, now: Double = monotonic()) -> Admission {
        if listenerIsLoopback { return .admitted }
        guard let ip = remote?.ipAddress.map(Self.normalized) else { return .refused }
        if IPNetwork.isLoopback(ip) { return .admitted }
        let own = ownAddress(ip)
        let (admission, log): (Admission, Int?) = state.withLock { s in
            let admission = Self.admission(ip, own: own, &s, now: now)
            if admission != .refused { return (admission, nil) }
            s.refused += 1
            guard now - s.lastRefusalLog >= 10 else {
                s.unsaidRefusals += 1
                return (.refused, nil)
            }
            let unsaid = s.unsaidRefusals
            s.lastRefusalLog = now
            s.unsaidRefusals = 0
            return (.refused, unsaid)
        }
        if let unsaid = log {
            var metadata: Logger.Metadata = ["CLIENT": "\(ip)"]
            if unsaid > 0 { metadata["SINCE_LAST"] = "\(unsaid) more" }
            logger.warning("refused a client outside access.allow (busymate allow IP lets it in)", metadata: metadata)
        }
        return admission
    }

    /// A granted client's connection asks again (its grant may have been
    /// extended, removed, or the address allowed meanwhile); not counted.
    func readmission(_ ip: String, now: Double = monotonic()) -> Admission {
        let own = ownAddress(ip)
        return state.withLock { Self.admission(ip, own: own, &$0, now: now) }
    }

    /// One of this machine's own addresses (read outside the registry's lock).
    private func ownAddress(_ ip: String) -> Bool {
        localAddresses.current().contains { Self.normalized($0) == ip }
    }

    private static func admission(_ ip: String, own: Bool, _ s: inout State, now: Double) -> Admission {
        if own || s.access.allow.contains(where: { $0.contains(ip) }) { return .admitted }
        return s.access.grantedUntil(ip).map { .granted(until: $0) } ?? .refused
    }

    public var refusedCount: Int { state.withLock { $0.refused } }

    // MARK: attribution and presence

    /// The device a client is: the port's device, a device named by this
    /// address, or the address itself.
    func identify(_ remote: SocketAddress?, frontEnd: FrontEnd) -> CapturePeer {
        let ip = remote?.ipAddress.map(Self.normalized)
        if case let .device(name) = frontEnd { return CapturePeer(device: name, frontEnd: frontEnd.name) }
        guard let ip else { return CapturePeer(device: nil, frontEnd: frontEnd.name) }
        let named = state.withLock { $0.byAddress[ip] }
        return CapturePeer(device: named ?? ip, frontEnd: frontEnd.name)
    }

    /// Traffic arrived from `peer` (a connection, a request, a DNS query).
    func touch(_ peer: CapturePeer, address: SocketAddress?, now: Double = monotonic()) {
        guard let device = peer.device, let source = peer.frontEnd else { return }
        let ip = address?.ipAddress.map(Self.normalized) ?? device
        state.withLock { s in
            if s.seen[device] == nil, s.seen.count >= Self.maxClients,
                let oldest = s.seen.filter({ s.ports[$0.key] == nil }).min(by: { $0.value.at < $1.value.at })?.key
            {
                s.seen[oldest] = nil
                s.reportedOnline.remove(oldest)
            }
            var entry = s.seen[device] ?? Seen(address: ip, source: source, at: now, wall: Date())
            entry.address = ip
            entry.at = now
            entry.wall = Date()
            if source == "transparent" { entry.transparentAt = now }
            // Transparent traffic within the window wins over the proxy's.
            if source == "transparent" || entry.transparentAt.map({ now - $0 >= s.idle }) ?? true { entry.source = source }
            s.seen[device] = entry
            if source == "transparent" { s.transparentSeenAt = now } else { s.proxySeenAt = now }
        }
    }

    /// A client completed an intercepted TLS handshake: it trusts our CA.
    /// The readiness card's "CA trusted" comes from this, per device, not
    /// from this machine's own trust store.
    /// Kept per device (two devices behind one address are two), and
    /// evicted with its presence.
    func trusted(_ peer: CapturePeer) {
        guard let device = peer.device else { return }
        state.withLock { s in
            guard s.seen[device] != nil, s.seen[device]?.trustedAt == nil else { return }
            s.seen[device]?.trustedAt = Date()
        }
    }

    /// The CA changed: what devices trusted was the old one.
    public func forgetTrust() {
        state.withLock { s in
            for device in s.seen.keys { s.seen[device]?.trustedAt = nil }
        }
    }

    /// Enrolled devices that sent traffic within the idle window and whose
    /// grant ends sooner than a full admission less one renewal step: the
    /// tunnel extends them (the seed's whitelist, renewed while in use),
    /// so an active device is written at most once per step. A grant that
    /// already ended is not revived: the device was refused meanwhile.
    /// Only the grant for exactly its address counts (a network's grant is
    /// the administrator's), and only traffic from that address.
    public func renewalsDue(now: Date = Date(), monotonicNow: Double = monotonic()) -> [String] {
        state.withLock { s in
            let due: [String] = s.enrolled.compactMap { name, ip in
                guard let seen = s.seen[name], seen.address == ip, monotonicNow - seen.at < s.idle,
                    let until = DeviceList.exactGrant(ip, in: s.access, now: now),
                    until < now.addingTimeInterval(AppSettings.Enrolment.admission - AppSettings.Enrolment.renewalStep),
                    s.renewalAsked[ip].map({ monotonicNow - $0 >= AppSettings.Enrolment.renewalStep }) ?? true
                else { return nil }
                return ip
            }
            for ip in due { s.renewalAsked[ip] = monotonicNow }
            return due.sorted()
        }
    }

    /// Devices that came online or went offline since the last sweep.
    public func sweep(now: Double = monotonic()) -> [PresenceChange] {
        state.withLock { s in
            var changes: [PresenceChange] = []
            for (device, seen) in s.seen {
                let online = now - seen.at < s.idle
                if online, !s.reportedOnline.contains(device) {
                    s.reportedOnline.insert(device)
                    changes.append(PresenceChange(device: device, online: true, source: seen.source))
                } else if !online, s.reportedOnline.contains(device) {
                    s.reportedOnline.remove(device)
                    changes.append(PresenceChange(device: device, online: false, source: seen.source))
                }
            }
            return changes.sorted { $0.device < $1.device }
        }
    }

    /// For `status.json`: every device seen, and the live mode as traffic shows it.
    public func snapshot(now: Double = monotonic()) -> (devices: [DevicePresence], network: NetworkPresence) {
        state.withLock { s in
            let devices = s.seen.map { name, seen in
                DevicePresence(
                    name: name, address: seen.address, port: s.ports[name], source: seen.source, online: now - seen.at < s.idle,
                    lastSeen: seen.wall,
                    caTrustedAt: seen.trustedAt)
            }.sorted { $0.name < $1.name }
            let transparent = s.transparentSeenAt.map { now - $0 < s.idle } ?? false
            let proxy = s.proxySeenAt.map { now - $0 < s.idle } ?? false
            return (devices, NetworkPresence(refused: s.refused, transparentTraffic: transparent, proxyTraffic: proxy))
        }
    }

    /// `::ffff:10.0.0.1` (a v4 client of a dual-stack socket) is `10.0.0.1`.
    static func normalized(_ ip: String) -> String {
        ip.hasPrefix("::ffff:") && ip.utf8.contains(UInt8(ascii: ".")) ? String(ip.dropFirst(7)) : ip
    }

    public static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// One connection's traffic tells the registry at most once a second: a
/// keep-alive connection's requests, or a tunnel's bytes, pay an atomic
/// load rather than the registry's lock each.
final class PresenceTouch: Sendable {
    private let registry: DeviceRegistry
    private let peer: CapturePeer
    private let client: SocketAddress?
    private let last = Atomic<Int>(Int.min)

    init(registry: DeviceRegistry, peer: CapturePeer, client: SocketAddress?) {
        self.registry = registry
        self.peer = peer
        self.client = client
    }

    func touch() {
        let now = Int(DeviceRegistry.monotonic())
        let seen = last.load(ordering: .relaxed)
        guard now != seen, last.compareExchange(expected: seen, desired: now, ordering: .relaxed).exchanged else { return }
        registry.touch(peer, address: client)
    }
}
