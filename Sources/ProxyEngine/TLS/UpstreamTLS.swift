import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// Client contexts for the upstream side: verifying against the system
/// trust store (plus `ssl_proxying.upstream_trust`), or not at all for the
/// hosts in `ssl_proxying.insecure_upstream`. Each offers `http/1.1`
/// alone, or `h2` first for a client that speaks HTTP/2 to us.
struct UpstreamTLS: Sendable {
    let verifying: NIOSSLContext
    let insecure: NIOSSLContext
    let verifyingH2: NIOSSLContext
    let insecureH2: NIOSSLContext
    /// Eager ALPN offers the client's own list: these are its other orders.
    let verifyingH2Only: NIOSSLContext
    let insecureH2Only: NIOSSLContext
    let verifyingH1First: NIOSSLContext
    let insecureH1First: NIOSSLContext
    let insecureHosts: SSLProxyMatcherBox
    /// `proxy.http2`: clients and origins are offered HTTP/2.
    let http2: Bool

    init(extraTrust: String?, insecureHosts: SSLProxyMatcherBox, http2: Bool = true) throws {
        func make(verify: Bool, alpn: [String]) throws -> NIOSSLContext {
            var config = TLSConfiguration.makeClientConfiguration()
            config.applicationProtocols = alpn
            config.shutdownTimeout = MITMContexts.shutdownTimeout
            config.curves = Self.curves
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
        verifyingH2Only = try make(verify: true, alpn: ["h2"])
        insecureH2Only = try make(verify: false, alpn: ["h2"])
        verifyingH1First = try make(verify: true, alpn: ["http/1.1", "h2"])
        insecureH1First = try make(verify: false, alpn: ["http/1.1", "h2"])
        self.insecureHosts = insecureHosts
        self.http2 = http2
    }

    /// Classic groups only, X25519 first: with X25519MLKEM768 anywhere on
    /// the list, BoringSSL's client sends its key share too, and generating
    /// it was 6 % of the tunnel's core per new connection, for a share most
    /// origins decline. Offering it only when the client did is still to do.
    static let curves: [NIOTLSCurve] = [.x25519, .secp256r1, .secp384r1]

    func context(for host: String, offeringH2: Bool = false) -> (context: NIOSSLContext, verified: Bool) {
        let loose = insecureHosts.matcher.shouldIntercept(host: host)
        switch (loose, offeringH2 && http2) {
        case (true, true): return (insecureH2, false)
        case (true, false): return (insecure, false)
        case (false, true): return (verifyingH2, true)
        case (false, false): return (verifying, true)
        }
    }

    /// A context offering `alpn`, a client's list of `h2` and `http/1.1` in its order (eager ALPN).
    func context(for host: String, offering alpn: [String]) -> (context: NIOSSLContext, verified: Bool) {
        let loose = insecureHosts.matcher.shouldIntercept(host: host)
        switch alpn {
        case ["h2"]: return loose ? (insecureH2Only, false) : (verifyingH2Only, true)
        case ["http/1.1", "h2"]: return loose ? (insecureH1First, false) : (verifyingH1First, true)
        case ["http/1.1"]: return context(for: host, offeringH2: false)
        default: return context(for: host, offeringH2: true)
        }
    }
}
