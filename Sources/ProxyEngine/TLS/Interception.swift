import BusymateShared
import Foundation
import Logging
import NIOSSL
import Synchronization

/// A host-pattern matcher passed by reference inside Sendable snapshots.
struct SSLProxyMatcherBox: Sendable {
    let matcher: SSLProxyMatcher
}

/// What the tunnel does with a CONNECT: intercept (MITM) or pass through.
/// Read on every CONNECT, replaced whole when settings or the CA change.
public final class Interception: Sendable {
    enum Decision {
        case intercept(MITMContexts, UpstreamTLS)
        case passthrough(why: String)
    }

    private struct Snapshot: Sendable {
        var matcher = SSLProxyMatcher(include: [], exclude: [])
        var contexts: MITMContexts?
        var caError: String? = "not loaded yet"
        var upstream: UpstreamTLS?
        var upstreamError: String?
        var upstreamProxy: UpstreamProxySetting?
        var autoPin = true
        var pinTTL: Double = 86_400
        var pinLoopback = false
        /// `proxy.http2`.
        var http2 = true
        /// The group's ca.pem, named in a refused row's advice.
        var caFile: String?
    }

    private let state = Mutex(Snapshot())
    /// Host → when its pin expires.
    /// Pinned hosts: when a client last refused us for each, and until when it is passed through.
    private let pinned = Mutex([String: (refused: Date, until: Date)]())
    /// Which clients trust our CA for which hosts, and their refusals.
    private let evidence = Mutex(PinEvidence())
    private let logger = Logger(label: "busymate.mitm")

    /// A pin this decides is stored by whoever reports the refusal (the
    /// MITM handler, through the capture hook's sink): `setPinned` brings
    /// stored pins back.
    public init() {}

    /// Loads the CA; a missing or broken CA turns interception off, with
    /// one clear error, and never stops the tunnel. True when another CA
    /// than the one in use was loaded.
    @discardableResult
    public func reloadCA(_ paths: GroupPaths) -> Bool {
        state.withLock { $0.caFile = paths.caPEM.path }
        do {
            let authority = try CertificateAuthority.load(paths)
            let replaced = state.withLock { s -> Bool in
                let other = s.contexts.map { $0.authority.caCertificate != authority.caCertificate } ?? false
                s.contexts = MITMContexts(authority: authority)
                s.caError = nil
                return other
            }
            Logger(label: "busymate.cert").info("CA loaded", metadata: ["SUBJECT": "\(authority.caCertificate.subject)"])
            return replaced
        } catch {
            let changed = state.withLock { s -> Bool in
                defer {
                    s.contexts = nil
                    s.caError = "\(error)"
                }
                return s.caError != "\(error)"
            }
            if changed {
                Logger(label: "busymate.cert").error(
                    "the CA cannot be used; HTTPS is passed through, not intercepted", metadata: ["ERROR": "\(error)"])
            }
            return false
        }
    }

    public func apply(_ settings: AppSettings) {
        var upstream: UpstreamTLS?
        var upstreamError: String?
        do {
            upstream = try UpstreamTLS(
                extraTrust: settings.upstreamTrust, insecureHosts: SSLProxyMatcherBox(matcher: settings.insecureUpstreamMatcher),
                http2: settings.http2)
        } catch {
            upstreamError = "ssl_proxying.upstream_trust \(settings.upstreamTrust ?? ""): \(error)"
            logger.error("cannot use the upstream trust bundle; verifying against the system store only", metadata: ["ERROR": "\(error)"])
            upstream = try? UpstreamTLS(
                extraTrust: nil, insecureHosts: SSLProxyMatcherBox(matcher: settings.insecureUpstreamMatcher), http2: settings.http2)
        }
        state.withLock {
            $0.matcher = settings.sslProxying
            $0.upstream = upstream
            $0.upstreamError = upstreamError
            $0.upstreamProxy = settings.upstreamProxy
            $0.autoPin = settings.autoPin
            $0.pinTTL = settings.pinTTL
            $0.pinLoopback = settings.pinLoopback
            $0.http2 = settings.http2
        }
    }

    public var caError: String? { state.withLock { $0.caError } }
    /// `proxy.http2`: h2c prior knowledge is taken from clients.
    var http2: Bool { state.withLock { $0.http2 } }
    /// The group's ca.pem, for advice on how to trust it.
    var caFile: String? { state.withLock { $0.caFile } }
    /// For requests a map_remote rule sends to https:// from plain HTTP.
    var upstreamTLS: UpstreamTLS? { state.withLock { $0.upstream } }

    /// The proxy a dial to `host` goes through (`upstream_proxy`), or nil for direct.
    func upstreamProxy(for host: String) -> UpstreamProxySetting? {
        state.withLock { $0.upstreamProxy }.flatMap { $0.carries(host) ? $0 : nil }
    }
    public var upstreamError: String? { state.withLock { $0.upstreamError } }

    func decide(host: String) -> Decision {
        let snapshot = state.withLock { $0 }
        guard snapshot.matcher.shouldIntercept(host: host) else { return .passthrough(why: "not on the SSL-proxying list") }
        // With auto_pin off, pins are not honoured either: every host on the list is intercepted.
        if snapshot.autoPin, let until = pinned.withLock({ $0[host.lowercased()]?.until }), until > Date() {
            return .passthrough(why: "pinned")
        }
        guard let contexts = snapshot.contexts else { return .passthrough(why: "no usable CA") }
        guard let upstream = snapshot.upstream else { return .passthrough(why: "no upstream TLS context") }
        return .intercept(contexts, upstream)
    }

    /// Whether `host` is passed through as pinned now.
    func isPinned(_ host: String) -> Bool {
        pinned.withLock { $0[host.lowercased()]?.until }.map { $0 > Date() } ?? false
    }

    /// What became of a refused handshake.
    enum PinOutcome: Equatable {
        /// Passed through until then.
        case pinned(until: Date)
        /// `ssl_proxying.auto_pin` is off.
        case autoPinOff
        /// The client has not completed an intercepted handshake with any
        /// other host lately: it most likely lacks our CA (a first curl run,
        /// a new device), and pinning would hide that.
        case clientDoesNotTrustUs
        /// A process on this machine: they all share the address, so one's
        /// trust says nothing of another's (`ssl_proxying.pin_loopback`).
        case loopbackClient
        /// It trusts our CA elsewhere and refused this host once: another
        /// refusal within the window pins it.
        case firstRefusal
    }

    /// A client completed an intercepted handshake for `host`: it trusts our CA.
    func noteTrusted(client ip: String?, host: String) {
        guard let ip else { return }
        evidence.withLock { $0.trusted(client: ip, host: host.lowercased()) }
    }

    /// A client refused our certificate for `host`. That is certificate
    /// pinning only when the same client completed intercepted handshakes
    /// with other hosts within `PinEvidence.window` and refused this host
    /// `PinEvidence.strikesToPin` times within it; loopback clients never
    /// pin unless `ssl_proxying.pin_loopback` says so. Then the host is
    /// passed through for `pin_ttl`.
    func refused(_ host: String, reason: String, client ip: String?) -> PinOutcome {
        let (autoPin, ttl, pinLoopback) = state.withLock { ($0.autoPin, $0.pinTTL, $0.pinLoopback) }
        guard autoPin else { return .autoPinOff }
        guard let ip else { return .clientDoesNotTrustUs }
        guard pinLoopback || !IPNetwork.isLoopback(ip) else { return .loopbackClient }
        let host = host.lowercased()
        let strikes = evidence.withLock { e -> Int? in
            guard e.trustsUsElsewhere(client: ip, besides: host) else { return nil }
            return e.strike(client: ip, host: host)
        }
        guard let strikes else { return .clientDoesNotTrustUs }
        guard strikes >= PinEvidence.strikesToPin else { return .firstRefusal }
        let now = Date()
        let until = now.addingTimeInterval(ttl)
        let fresh = pinned.withLock { table -> Bool in
            defer { table[host] = (now, until) }
            return (table[host]?.until ?? .distantPast) <= now
        }
        if fresh {
            logger.notice(
                "a client that trusts our CA for other hosts refused our certificate again (pinning); passing this host through",
                metadata: ["HOST": "\(host)", "REASON": "\(reason)", "UNTIL": "\(until)", "CLIENT": "\(ip)"])
        }
        return .pinned(until: until)
    }

    /// The stored pins (host → when a client last refused us for it): each
    /// lasts `pin_ttl` from then. `readSince`: when the read of the store
    /// began; a pin made here after that is not in it yet and is kept.
    public func setPinned(_ lastRefused: [String: Date], readSince: Date = .distantFuture) {
        let ttl = state.withLock { $0.pinTTL }
        let removed = pinned.withLock { table -> Set<String> in
            let old = table
            table = Dictionary(lastRefused.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: max)
                .mapValues { (refused: $0, until: $0.addingTimeInterval(ttl)) }
            for (host, pin) in old where table[host] == nil && pin.refused >= readSince { table[host] = pin }
            return Set(old.keys).subtracting(table.keys)
        }
        // A removed pin starts from no refusals: it takes two again.
        if !removed.isEmpty { evidence.withLock { e in removed.forEach { e.forget(host: $0) } } }
    }
}
