import Logging
import NIOCore

/// Deciding: by a CONNECT's host before any byte, else by the first bytes.
extension ConnectionRouter {
    /// A CONNECT's router, once the HTTP layer has gone (but the encoder,
    /// for the answer): the CONNECT's host decides.
    func begin() {
        guard case .idle = state, let context else { return }
        decideByHost(original, context: context)
    }

    /// Intercept `target`'s TLS, or pass its bytes through, as its host decides.
    func decideByHost(_ target: ProxyTarget, context: ChannelHandlerContext) {
        switch services.interception.decide(host: target.host) {
        case let .intercept(contexts, upstream):
            intercept(target, contexts, upstream, context: context)
        case let .passthrough(why):
            logger.debug("passing through", metadata: ["TARGET": "\(target)", "WHY": "\(why)"])
            dial(target, context: context)
        }
    }

    /// Reads what came so far; acts once it says what it is.
    func peek(context: ChannelHandlerContext) {
        guard case let .peeking(tls) = state else { return }
        let allowH2C = services.interception.http2
        guard let kind = FirstBytes.classify(seen, allowH2C: allowH2C, insideConnect: connectHead != nil) else { return }
        decide(kind, tls: tls, context: context)
    }

    /// The first bytes have said what they are.
    func decide(_ kind: FirstBytes, tls: InterceptTLS?, context: ChannelHandlerContext) {
        clock?.cancel()
        switch kind {
        case .http, .h2c:
            handOverPlaintext(h2c: kind == .h2c, to: plaintextTarget, context: context)
        case let .tls(sni):
            if let tls {
                // A CONNECT's host has decided already.
                handOverTLS(original, tls, context: context)
                return
            }
            let target = ProxyTarget(host: sni ?? learnedHost, port: original.port)
            logger[metadataKey: "HOST"] = "\(target.host)"
            decideByHost(target, context: context)
        case .opaque:
            dial(ProxyTarget(host: learnedHost, port: original.port), context: context)
        }
    }

    /// The client half-closed: a redirected connection decides with what
    /// came; a CONNECT's client is left to the handshake clock, as a
    /// handshake that never finishes would be.
    func inputClosedWhilePeeking(context: ChannelHandlerContext) {
        guard connectHead == nil, case .peeking = state else { return }
        let kind = FirstBytes.classify(seen, allowH2C: services.interception.http2) ?? .opaque
        decide(kind, tls: nil, context: context)
    }

    /// Where plaintext HTTP goes: the CONNECT's target, else the original
    /// destination's port under the name the client knows it by.
    var plaintextTarget: ProxyTarget {
        connectHead == nil ? ProxyTarget(host: learnedHost, port: original.port) : original
    }

    /// The name for a redirected connection when the bytes name none: the
    /// one its client looked up through the forwarder, else the address.
    var learnedHost: String {
        guard let client = owner.channel.remoteAddress?.ipAddress else { return original.host }
        return services.dnsNames?.name(for: original.host, client: client) ?? original.host
    }

    // MARK: clocks

    /// A redirected client that says nothing (a server-speaks-first
    /// protocol) is passed through once the request-head timeout has gone by.
    func startSilenceClock(context: ChannelHandlerContext) {
        let seconds = services.timeouts.requestHead
        clock = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
            guard case .peeking = state, let context = self.context else { return }
            decide(.opaque, tls: nil, context: context)
        }
    }

    /// A CONNECT's client that sends nothing after the 200 is closed as a
    /// handshake that never finished would be.
    func startHandshakeClock(context: ChannelHandlerContext) {
        let seconds = services.timeouts.tlsHandshake
        clock = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
            guard case .peeking = state, let context = self.context else { return }
            // As MITMHandler says of a handshake that never finishes: our own hang-up, one row, no pin.
            let why = "the client's TLS handshake did not finish within \(TimeoutWords.format(seconds)) s (timeouts.tls_handshake_seconds)"
            logger.notice("closed a TLS handshake that did not finish", metadata: ["WHY": "\(why)"])
            hooks.handshakeRefused(original, sni: nil, client: context.channel.remoteAddress, why: why)
            close(context)
        }
    }
}
