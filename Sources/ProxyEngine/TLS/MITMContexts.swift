import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// TLS server contexts for intercepted hosts, cached per CONNECT host and
/// ALPN offer (`h2` and `http/1.1`, or one of them alone). A
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
        try serverContext(for: host, alpn: Self.alpn(http2: http2))
    }

    /// A context offering exactly `alpn` (eager ALPN: what the origin chose).
    func serverContext(for host: String, alpn: [String]) throws -> NIOSSLContext {
        let name = host.lowercased()
        let key = alpn.joined(separator: ",") + " " + name
        if let cached = contexts.withLock({ $0.get(key) }), cached.notAfter.timeIntervalSinceNow > 86_400 {
            return cached.context
        }
        let leaf = try authority.leaf(for: name)
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(leaf.certificate)], privateKey: .privateKey(authority.leafKeyForNIO))
        config.applicationProtocols = alpn
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
