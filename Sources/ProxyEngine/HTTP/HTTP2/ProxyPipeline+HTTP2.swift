import BusymateShared
import NIOCore
import NIOHTTP1
import NIOHTTP2

/// The HTTP/2 server layer facing the client: NIO's HTTP/2 handler and
/// connection manager on the connection, and `ClientStreams` behind the
/// handler, where each stream carries an `HTTPExchangeHandler` of its own,
/// so each stream is one exchange with everything an HTTP/1 exchange has
/// (rules, breakpoints, capture, timeouts) and a held stream holds only
/// itself.
extension ProxyPipeline {
    /// The explicit proxy's client opened with h2c's preface: the HTTP/2
    /// layer in place of the HTTP/1 one; the sniffer hands it the bytes.
    /// The HTTP/1 decoder leaves on a later tick, and nothing may meet it
    /// meanwhile: the sniffer keeps the bytes until it has gone.
    func startH2C(replacing sniffer: FrontEndSniffer) throws {
        let bound = NIOLoopBound((self, sniffer), eventLoop: channel.eventLoop)
        removeHTTP(keepingEncoder: false).whenComplete { result in
            let (owner, sniffer) = bound.value
            do {
                try result.get()
                try owner.installHTTP2(route: .absoluteForm, pinnedAddress: nil, priorKnowledge: true, position: .after(sniffer))
                owner.ops.removeHandler(sniffer, promise: nil)
            } catch {
                owner.services.logger.error("cannot set up HTTP/2 for an h2c client", metadata: ["ERROR": "\(error)"])
                owner.channel.close(promise: nil)
            }
        }
    }

    /// A routed plain connection (redirected, SOCKS5, or inside an
    /// intercepted CONNECT) that opened with h2c's preface.
    func plaintextH2C(_ original: ProxyTarget, pinnedAddress: String?, replacing router: some RemovableChannelHandler) throws {
        // Plaintext inside a CONNECT: the encoder kept for the router's 200 goes first.
        removeKeptEncoder()
        try installHTTP2(route: .transparent(original), pinnedAddress: pinnedAddress, priorKnowledge: true, position: .after(router))
        ops.removeHandler(router, promise: nil)
    }

    @discardableResult
    func installHTTP2(
        route: ForwardRoute, pinnedAddress: String?, priorKnowledge: Bool = false,
        position: ChannelPipeline.SynchronousOperations.Position
    ) throws -> HTTP2ClientLeg {
        let leg = HTTP2ClientLeg(owner: self, priorKnowledge: priorKnowledge)
        let timeouts = services.timeouts
        let manager = NIOHTTP2ServerConnectionManagementHandler(
            eventLoop: channel.eventLoop,
            configuration: .init(
                maxIdleTime: .milliseconds(Int64(timeouts.idle * 1000)), maxAge: nil,
                maxGraceTime: .milliseconds(Int64(max(1, timeouts.drainIdleWait) * 1000)), keepalive: nil))
        // Frames, not stream channels: each stream is a `ClientStream` carrying its own exchange.
        let handler = NIOHTTP2Handler(
            mode: .server, connectionConfiguration: HTTP2Limits.serverConnection, streamConfiguration: HTTP2Limits.stream)
        var tapsScheme = false
        if priorKnowledge, case .absoluteForm = route { tapsScheme = true }
        let streams = ClientStreams(
            exchanges: .init(
                owner: self, leg: leg, route: route, pinnedAddress: pinnedAddress, clientSNI: clientSNI, services: services,
                tapsScheme: tapsScheme),
            manager: manager.http2StreamDelegate)
        // After a connection error the client is told (GOAWAY) and let go.
        let closer = HTTP2ConnectionErrorCloser(logger: services.logger)
        try ops.addHandlers(
            [
                FlushCoalescer(), closer, handler, streams, manager, HTTP2ClientEnd(owner: self),
                HTTP2ConnectionErrorCloser.Stalled(logger: services.logger, closer: closer),
            ],
            position: position)
        // The connection was active before the layer came: start its idle clock.
        if channel.isActive, let context = try? ops.context(handler: manager) { manager.channelActive(context: context) }
        let pool = leg.upstream
        channel.closeFuture.assumeIsolated().whenComplete { _ in pool.closeAll() }
        services.logger.debug("HTTP/2 with the client", metadata: ["PRIOR_KNOWLEDGE": "\(priorKnowledge)"])
        return leg
    }
}
