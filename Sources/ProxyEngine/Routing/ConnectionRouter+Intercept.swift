import Logging
import NIOCore
import NIOSSL

/// Handing over to the layers that read the client's bytes: TLS
/// interception with HTTP inside, or plaintext HTTP/1 or h2c.
extension ConnectionRouter {
    /// `target` is to be intercepted. A CONNECT answers 200 and peeks at the
    /// first bytes (a client may speak plaintext in the tunnel); a
    /// redirected connection has peeked already and hands over to TLS.
    func intercept(_ target: ProxyTarget, _ contexts: MITMContexts, _ upstream: UpstreamTLS, context: ChannelHandlerContext) {
        // With ALPN on, the origin is dialled before the client's handshake
        // (`dialEagerly`); else per request, after it. A failed dial reaches
        // the client as a 502, after its handshake.
        let connect = connectHead != nil
        if connect {
            logger.debug("CONNECT, intercepting", metadata: ["TARGET": "\(target)"])
            hooks.tunnelIntercepted()
        }
        let serverContext: NIOSSLContext
        do {
            serverContext = try contexts.serverContext(for: target.host, http2: upstream.http2)
        } catch {
            let failure = ProxyError.certificate(host: target.host, detail: "\(error)")
            if connect {
                logger.error("cannot intercept", metadata: ["ERROR": "\(failure)"])
                refuse(failure, context: context)
            } else {
                logger.error("cannot intercept; passing through", metadata: ["ERROR": "\(failure)"])
                dial(target, context: context)
            }
            return
        }
        guard connect else {
            hooks.tunnelIntercepted()
            handOverTLS(target, (serverContext, upstream, contexts), context: context)
            return
        }
        writeEstablished(context: context)
        state = .peeking((serverContext, upstream, contexts))
        startHandshakeClock(context: context)
        // The bytes that came meanwhile (the decoder's left-over ones) are peeked at first.
        for data in held.parts {
            var bytes = unwrapInboundIn(data)
            seen.writeBuffer(&bytes)
        }
        // Reads were held while the HTTP layer left: ask for the first bytes.
        if seen.readableBytes == 0 { context.read() }
        peek(context: context)
    }

    /// The TLS interception layer with HTTP inside, in place of the router:
    /// the bytes held (the ClientHello) go to TLS.
    /// When the client offered ALPN, the origin is dialled first and the
    /// client is offered what it chose (`dialEagerly`).
    func handOverTLS(_ target: ProxyTarget, _ tls: InterceptTLS, context: ChannelHandlerContext) {
        // SOCKS5's connection: the eager dial takes it, else it is closed.
        if dialEagerly(target, tls, context: context) { return }
        handOverTLS(target, serverContext: tls.serverContext, upstream: tls.upstream, eager: nil, context: context)
    }

    func handOverTLS(
        _ target: ProxyTarget, serverContext: NIOSSLContext, upstream: UpstreamTLS, eager: EagerOrigin?,
        context: ChannelHandlerContext
    ) {
        state = .handingOver
        do {
            try owner.intercept(
                target, serverContext: serverContext, upstream: upstream, pinnedAddress: pinned, eager: eager, replacing: self)
        } catch {
            logger.error("cannot set up interception", metadata: ["ERROR": "\(error)"])
            close(context)
        }
    }

    /// A client that speaks plaintext HTTP/1 or h2c (on a redirected port
    /// 80; curl `--proxytunnel` to an http:// URL or grpcio's plaintext
    /// channel inside a CONNECT) is read as HTTP to `target`, not refused
    /// as a failed handshake.
    func handOverPlaintext(h2c: Bool, to target: ProxyTarget, context: ChannelHandlerContext) {
        state = .handingOver
        dropDialled()
        logger.debug("plaintext HTTP", metadata: ["TARGET": "\(target)", "H2C": "\(h2c)"])
        do {
            if h2c {
                try owner.plaintextH2C(target, pinnedAddress: pinned, replacing: self)
            } else {
                try owner.plaintextHTTP(target, pinnedAddress: pinned, replacing: self)
            }
        } catch {
            logger.error("cannot set up HTTP on a routed connection", metadata: ["ERROR": "\(error)"])
            close(context)
        }
    }
}
