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
    }

    private let state = Mutex(Snapshot())
    private let pinned = Mutex(Set<String>())
    private let logger = Logger(label: "busymate.mitm")
    /// Persists a new pin (the capture store's pinned_domains).
    private let onPin: (@Sendable (String, String) -> Void)?

    public init(onPin: (@Sendable (_ host: String, _ reason: String) -> Void)? = nil) {
        self.onPin = onPin
    }

    /// Loads the CA; a missing or broken CA turns interception off, with
    /// one clear error, and never stops the tunnel.
    public func reloadCA(_ paths: GroupPaths) {
        do {
            let authority = try CertificateAuthority.load(paths)
            state.withLock {
                $0.contexts = MITMContexts(authority: authority)
                $0.caError = nil
            }
            Logger(label: "busymate.cert").info("CA loaded", metadata: ["SUBJECT": "\(authority.caCertificate.subject)"])
        } catch {
            let changed = state.withLock { s -> Bool in
                defer {
                    s.contexts = nil
                    s.caError = "\(error)"
                }
                return s.caError != "\(error)"
            }
            if changed {
                Logger(label: "busymate.cert").error("the CA cannot be used; HTTPS is passed through, not intercepted", metadata: ["ERROR": "\(error)"])
            }
        }
    }

    public func apply(_ settings: AppSettings) {
        var upstream: UpstreamTLS?
        var upstreamError: String?
        do {
            upstream = try UpstreamTLS(extraTrust: settings.upstreamTrust, insecureHosts: SSLProxyMatcherBox(matcher: settings.insecureUpstreamMatcher))
        } catch {
            upstreamError = "ssl_proxying.upstream_trust \(settings.upstreamTrust ?? ""): \(error)"
            logger.error("cannot use the upstream trust bundle; verifying against the system store only", metadata: ["ERROR": "\(error)"])
            upstream = try? UpstreamTLS(extraTrust: nil, insecureHosts: SSLProxyMatcherBox(matcher: settings.insecureUpstreamMatcher))
        }
        state.withLock {
            $0.matcher = settings.sslProxying
            $0.upstream = upstream
            $0.upstreamError = upstreamError
            $0.upstreamProxy = settings.upstreamProxy
        }
    }

    public var caError: String? { state.withLock { $0.caError } }
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
        if pinned.withLock({ $0.contains(host.lowercased()) }) { return .passthrough(why: "pinned") }
        guard let contexts = snapshot.contexts else { return .passthrough(why: "no usable CA") }
        guard let upstream = snapshot.upstream else { return .passthrough(why: "no upstream TLS context") }
        return .intercept(contexts, upstream)
    }

    /// A client refused our certificate for `host`: pass it through from now on.
    func pin(_ host: String, reason: String) {
        let inserted = pinned.withLock { $0.insert(host.lowercased()).inserted }
        onPin?(host.lowercased(), reason)
        if inserted {
            logger.notice("the client rejected the interception certificate; passing this host through from now on", metadata: ["HOST": "\(host)", "REASON": "\(reason)"])
        }
    }

    public func setPinned(_ hosts: Set<String>) { pinned.withLock { $0 = Set(hosts.map { $0.lowercased() }) } }
}
