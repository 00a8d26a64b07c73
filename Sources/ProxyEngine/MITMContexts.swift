import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// TLS server contexts for intercepted hosts, cached per CONNECT host. A
/// context's own leaf is for that host (so a client that sends no SNI, as
/// when it connects by IP, still gets the right name); its
/// `sslContextCallback` swaps in a leaf for any other SNI.
final class MITMContexts: Sendable {
    /// How long a closing TLS connection waits for the peer's close_notify
    /// (NIOSSL's default is 5 s). NIOSSL keeps the handler, its buffers and
    /// the SSL object until this timer fires even when the peer has hung up,
    /// so at a thousand connections a second the default held 150 MB.
    static let shutdownTimeout = TimeAmount.milliseconds(250)

    let authority: CertificateAuthority
    private let contexts = Mutex(LeafCache<(context: NIOSSLContext, notAfter: Date)>(capacity: 1024))

    init(authority: CertificateAuthority) {
        self.authority = authority
    }

    func serverContext(for host: String) throws -> NIOSSLContext {
        let key = host.lowercased()
        if let cached = contexts.withLock({ $0.get(key) }), cached.notAfter.timeIntervalSinceNow > 86_400 {
            return cached.context
        }
        let leaf = try authority.leaf(for: key)
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(leaf.certificate)], privateKey: .privateKey(authority.leafKeyForNIO))
        config.applicationProtocols = ["http/1.1"]
        config.shutdownTimeout = Self.shutdownTimeout
        let authority = self.authority
        config.sslContextCallback = { values, promise in
            guard let sni = values.serverHostname?.lowercased(), sni != key else {
                promise.succeed(.noChanges)
                return
            }
            do {
                var override = NIOSSLContextConfigurationOverride()
                override.certificateChain = [.certificate(try authority.leaf(for: sni).certificate)]
                override.privateKey = .privateKey(authority.leafKeyForNIO)
                promise.succeed(override)
            } catch {
                promise.fail(error)
            }
        }
        let context = try NIOSSLContext(configuration: config)
        contexts.withLock { $0.set(key, (context, leaf.notAfter)) }
        return context
    }
}

/// Client contexts for the upstream side: verifying against the system
/// trust store (plus `ssl_proxying.upstream_trust`), or not at all for the
/// hosts in `ssl_proxying.insecure_upstream`.
struct UpstreamTLS: Sendable {
    let verifying: NIOSSLContext
    let insecure: NIOSSLContext
    let insecureHosts: SSLProxyMatcherBox

    init(extraTrust: String?, insecureHosts: SSLProxyMatcherBox) throws {
        var config = TLSConfiguration.makeClientConfiguration()
        config.applicationProtocols = ["http/1.1"]
        config.shutdownTimeout = MITMContexts.shutdownTimeout
        if let extraTrust { config.additionalTrustRoots = [.file(extraTrust)] }
        verifying = try NIOSSLContext(configuration: config)
        var loose = TLSConfiguration.makeClientConfiguration()
        loose.applicationProtocols = ["http/1.1"]
        loose.certificateVerification = .none
        loose.shutdownTimeout = MITMContexts.shutdownTimeout
        insecure = try NIOSSLContext(configuration: loose)
        self.insecureHosts = insecureHosts
    }

    func context(for host: String) -> (context: NIOSSLContext, verified: Bool) {
        insecureHosts.matcher.shouldIntercept(host: host) ? (insecure, false) : (verifying, true)
    }
}
