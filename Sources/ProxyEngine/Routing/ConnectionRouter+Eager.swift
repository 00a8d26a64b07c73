import Logging
import NIOCore
import NIOSSL

/// mitmproxy's eager ALPN: before the ClientHello goes to TLS, the origin
/// is dialled offering the client's own protocols, and the client is then
/// offered exactly what the origin chose. So a client speaks to Busymate
/// what it would speak to the origin (HTTP/1.1 to an HTTP/1.1-only one),
/// and its handshake waits for the origin's.
extension ConnectionRouter {
    /// The protocols eager ALPN passes on from a client's list, in its order.
    static let eagerProtocols: Set<String> = ["h2", "http/1.1"]

    /// Starts the origin's dial when the client offered ALPN and HTTP/2 is
    /// on (`proxy.http2`); false: hand over as without it. A SOCKS5
    /// connection's TLS to the origin goes over the connection its handshake
    /// opened (offering `http/1.1` alone when the client offered no ALPN or
    /// HTTP/2 is off), so the origin sees one connection, not two.
    func dialEagerly(_ target: ProxyTarget, _ tls: InterceptTLS, context: ChannelHandlerContext) -> Bool {
        // SOCKS5's connection goes where its target (or pin) went: usable only when the
        // handshake names that host, not another the ClientHello's SNI chose.
        let sameHost = pinned != nil || target.host.lowercased() == original.host.lowercased()
        let peer = dialled.flatMap { $0.peer.isActive && $0.tunnel.early == nil && sameHost ? $0.peer : nil }
        if peer == nil { dropDialled() }
        let fromHello: [String]? = {
            guard tls.upstream.http2, case let .found(hello) = TLSHello.parse(seen, expecting: 1) else { return nil }
            return hello.alpn?.filter(Self.eagerProtocols.contains)
        }()
        guard let offer = fromHello.flatMap({ $0.isEmpty ? nil : $0 }) ?? (peer != nil ? ["http/1.1"] : nil) else {
            dropDialled()
            return false
        }
        if services.interception.upstreamProxy(for: target.host) != nil {
            logger.debug(
                "eager ALPN skipped: upstream_proxy chains this host; the origin is dialled per request",
                metadata: ["TARGET": "\(target)"])
            dropDialled()
            return false
        }
        // Where the first request would go: the redirected or SOCKS5
        // connection's pin, or a host_override rule's address.
        let override = pinned ?? owner.passThroughOverride(for: target, headers: connectHead?.headers)?.address
        // SOCKS5's connection is the eager one's now: the router no longer closes it.
        dialled = nil
        state = .eagerDialling
        logger.debug(
            "eager ALPN: dialling the origin first",
            metadata: ["TARGET": "\(target)", "ALPN": "\(offer)", "OVER_SOCKS5_CONNECTION": "\(peer != nil)"])
        EagerOrigin.dial(
            target, override: override, over: peer, offer: offer, upstreamTLS: tls.upstream, services: services,
            on: context.eventLoop
        ) { [self] result in
            eagerDialled(target, tls, offer: offer, result)
        }
        return true
    }

    private func eagerDialled(_ target: ProxyTarget, _ tls: InterceptTLS, offer: [String], _ result: Result<EagerOrigin, Error>) {
        guard case .eagerDialling = state, let context else {
            // The client went meanwhile.
            if case let .success(origin) = result { origin.close() }
            return
        }
        switch result {
        case let .success(origin):
            // A client that offered `h2` alone is offered it whatever the origin chose: it can speak nothing else, and
            // its streams are translated to HTTP/1.1.
            let chosen = origin.isHTTP2 || !offer.contains("http/1.1") ? ["h2"] : ["http/1.1"]
            logger.debug(
                "eager ALPN: the origin chose", metadata: ["TARGET": "\(target)", "H2": "\(origin.isHTTP2)", "OFFERED": "\(chosen)"])
            do {
                let serverContext = try tls.contexts.serverContext(for: target.host, alpn: chosen)
                handOverTLS(target, serverContext: serverContext, upstream: tls.upstream, eager: origin, context: context)
            } catch {
                origin.close()
                handOverTLS(target, serverContext: tls.serverContext, upstream: tls.upstream, eager: nil, context: context)
            }
        case let .failure(error):
            // As without eager ALPN: the client's handshake goes on, and its request's own dial tells it why (a 502).
            logger.debug(
                "eager ALPN: the origin's dial failed; offering the client as without it",
                metadata: ["TARGET": "\(target)", "ERROR": "\(error)"])
            handOverTLS(target, serverContext: tls.serverContext, upstream: tls.upstream, eager: nil, context: context)
        }
    }
}
