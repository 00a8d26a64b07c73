import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// TLS server contexts for intercepted hosts, cached per CONNECT host and
/// ALPN offer (`h2` and `http/1.1`, or `http/1.1` alone). A
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

    /// The protocols offered to a client: HTTP/2 first when it is on (`proxy.http2`).
    static func alpn(http2: Bool) -> [String] { http2 ? ["h2", "http/1.1"] : ["http/1.1"] }

    func serverContext(for host: String, http2: Bool) throws -> NIOSSLContext {
        let name = host.lowercased()
        let key = http2 ? "h2 " + name : name
        if let cached = contexts.withLock({ $0.get(key) }), cached.notAfter.timeIntervalSinceNow > 86_400 {
            return cached.context
        }
        let leaf = try authority.leaf(for: name)
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(leaf.certificate)], privateKey: .privateKey(authority.leafKeyForNIO))
        config.applicationProtocols = Self.alpn(http2: http2)
        config.shutdownTimeout = Self.shutdownTimeout
        let authority = self.authority
        config.sslContextCallback = { values, promise in
            guard let sni = values.serverHostname?.lowercased(), sni != name else {
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
/// hosts in `ssl_proxying.insecure_upstream`. Each offers `http/1.1`
/// alone, or `h2` first for a client that speaks HTTP/2 to us.
struct UpstreamTLS: Sendable {
    let verifying: NIOSSLContext
    let insecure: NIOSSLContext
    let verifyingH2: NIOSSLContext
    let insecureH2: NIOSSLContext
    let insecureHosts: SSLProxyMatcherBox
    /// `proxy.http2`: clients and origins are offered HTTP/2.
    let http2: Bool

    init(extraTrust: String?, insecureHosts: SSLProxyMatcherBox, http2: Bool = true) throws {
        func make(verify: Bool, alpn: [String]) throws -> NIOSSLContext {
            var config = TLSConfiguration.makeClientConfiguration()
            config.applicationProtocols = alpn
            config.shutdownTimeout = MITMContexts.shutdownTimeout
            if verify {
                if let extraTrust { config.additionalTrustRoots = [.file(extraTrust)] }
            } else {
                config.certificateVerification = .none
            }
            return try NIOSSLContext(configuration: config)
        }
        verifying = try make(verify: true, alpn: ["http/1.1"])
        insecure = try make(verify: false, alpn: ["http/1.1"])
        verifyingH2 = try make(verify: true, alpn: ["h2", "http/1.1"])
        insecureH2 = try make(verify: false, alpn: ["h2", "http/1.1"])
        self.insecureHosts = insecureHosts
        self.http2 = http2
    }

    func context(for host: String, offeringH2: Bool = false) -> (context: NIOSSLContext, verified: Bool) {
        let loose = insecureHosts.matcher.shouldIntercept(host: host)
        switch (loose, offeringH2 && http2) {
        case (true, true): return (insecureH2, false)
        case (true, false): return (insecure, false)
        case (false, true): return (verifyingH2, true)
        case (false, false): return (verifying, true)
        }
    }
}
