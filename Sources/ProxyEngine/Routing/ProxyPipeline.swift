import BusymateShared
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOWebSocket

/// The one owner of a client connection's layers. It installs the HTTP
/// layer (spelled out here and nowhere else) and swaps it, when asked, for
/// the router (after a CONNECT), a glued tunnel, the TLS interception layer with HTTP
/// inside it, or glued bytes after a `101`. No handler adds, finds or
/// removes another: they ask this owner, which removes what it installed.
/// Confined to the connection's event loop.
final class ProxyPipeline {
    let channel: Channel
    /// The connection's services; a SOCKS5 client changes its front end.
    private(set) var services: ProxyServices
    /// The HTTP layer in place, if any.
    private var http: HTTPLayer?
    /// On an intercepted connection: the socket's side of TLS.
    private var raw: RawCloser?
    /// The client's TLS ended without close_notify (a plain TCP FIN).
    private var tlsEndedRaggedly = false
    /// The SNI the client sent (intercepted connections), for each exchange's row.
    private(set) var clientSNI: String?
    /// On an intercepted connection: the origin connection dialled before
    /// the client's handshake (eager ALPN), until an exchange takes it.
    private var eager: EagerOrigin?

    /// One HTTP/1 server layer: bytes in, exchanges to `exchange`, responses out.
    private struct HTTPLayer {
        let encoder: HTTPResponseEncoder
        let tap: RequestLineTap
        let decoder: ByteToMessageHandler<HTTPRequestDecoder>
        let connection: HTTP1ServerConnection
        let exchange: HTTPExchangeHandler
    }

    init(channel: Channel, services: ProxyServices) {
        self.channel = channel
        self.services = services
        if services.peer.connectionID == nil { self.services.peer.connectionID = ConnectionID.make() }
        // Once per connection (an HTTP/2 connection's streams share it).
        if services.hooks == nil { self.services.hooks = HookList(services) }
        // The layers' handlers hold this owner; it lets go of them at the end.
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        channel.closeFuture.whenComplete { _ in
            bound.value.http = nil
            bound.value.raw = nil
            bound.value.eager?.close()
            bound.value.eager = nil
        }
    }

    /// How the client came in, for the rows from here on.
    func setFrontEnd(_ name: String) { services.peer.frontEnd = name }

    var ops: ChannelPipeline.SynchronousOperations { channel.pipeline.syncOperations }

    /// The explicit proxy's front end: a new client connection starts with
    /// the HTTP layer, where each request names its host or asks to CONNECT.
    static func startExplicitProxy(_ channel: Channel, services: ProxyServices) throws {
        let owner = ProxyPipeline(channel: channel, services: services)
        try channel.pipeline.syncOperations.addHandler(ConnectionCounter(stats: services.stats))
        // The first byte says HTTP or SOCKS5: the sniffer leaves once it has come.
        try channel.pipeline.syncOperations.addHandler(FrontEndSniffer(owner: owner))
        _ = try owner.installHTTP(route: .absoluteForm, position: .last)
    }

    /// The transparent front end: the original destination comes from
    /// conntrack, then the router (`RouteEntry.redirected`) peeks at the first bytes (TLS, HTTP or
    /// anything else) and asks for the layer they need. A connection that
    /// was not redirected (a client dialling the port itself) is closed.
    static func startTransparent(_ channel: Channel, services: ProxyServices) -> EventLoopFuture<Void> {
        OriginalDestination.read(channel).flatMapThrowing { original in
            // Not redirected: no conntrack entry, or the socket's own address.
            let own = channel.localAddress.map { $0.ipAddress == original?.ipAddress && $0.port == original?.port } ?? false
            guard let original, !own, let ip = original.ipAddress, let port = original.port else {
                services.logger.notice(
                    "a connection to the transparent port that was not redirected; closed",
                    metadata: ["CLIENT": "\(channel.remoteAddress.map(ExchangeCapture.describe) ?? "?")"])
                channel.close(promise: nil)
                return
            }
            let owner = ProxyPipeline(channel: channel, services: services)
            try channel.pipeline.syncOperations.addHandler(ConnectionCounter(stats: services.stats))
            let destination = ProxyTarget(host: DeviceRegistry.normalized(ip), port: port)
            try channel.pipeline.syncOperations.addHandler(ConnectionRouter(owner: owner, entry: .redirected(destination)))
        }
    }

    /// Plain HTTP/1 arrived on a routed connection (redirected, SOCKS5, or
    /// inside an intercepted CONNECT): the HTTP layer in place of the
    /// router, every request dialled to `original`.
    func plaintextHTTP(_ original: ProxyTarget, pinnedAddress: String?, replacing router: some RemovableChannelHandler) throws {
        // Plaintext inside a CONNECT: the encoder kept for the router's 200 goes first.
        removeKeptEncoder()
        let exchange = try installHTTP(route: .transparent(original), position: .after(router))
        exchange.pinnedAddress = pinnedAddress
        ops.removeHandler(router, promise: nil)
    }

    /// Whether the HTTP layer's tap percent-encoded `target` (raw bytes outside ASCII).
    func tookEncodedTarget(_ target: String) -> Bool { http?.tap.takeEncoded(target) ?? false }

    /// Adds the HTTP layer at `position`; returns its exchange handler.
    @discardableResult
    func installHTTP(route: ForwardRoute, position: ChannelPipeline.SynchronousOperations.Position) throws -> HTTPExchangeHandler {
        var encoderConfig = HTTPResponseEncoder.Configuration()
        // The exchange handler frames responses itself: only it knows which answer a HEAD.
        encoderConfig.automaticallySetFramingHeaders = false
        let target: ProxyTarget? = { if case let .intercepted(target, _) = route { target } else { nil } }()
        let hooks = ExchangeHooks(services: services)
        let connection = HTTP1ServerConnection(
            timeouts: services.timeouts, hooks: hooks, logger: services.logger, interceptedTarget: target, owner: self)
        let tap = RequestLineTap()
        tap.connection = connection
        connection.tap = tap
        let layer = HTTPLayer(
            encoder: HTTPResponseEncoder(configuration: encoderConfig),
            tap: tap,
            decoder: MalformedRequest.requestDecoder(),
            connection: connection,
            exchange: HTTPExchangeHandler(owner: self, route: route))
        let handlers: [ChannelHandler] = [layer.encoder, layer.tap, layer.decoder, layer.connection, layer.exchange]
        try ops.addHandlers(handlers, position: position)
        http = layer
        return layer.exchange
    }

    /// Takes the HTTP layer out, the decoder last but for the tap: it hands
    /// on the bytes it holds beyond the last request, and they must meet a
    /// handler that takes bytes. `keepingEncoder` leaves the encoder for a
    /// reply still to come (the router's answer to a CONNECT).
    /// The future says when the decoder has gone (it leaves on a later tick).
    @discardableResult
    func removeHTTP(keepingEncoder: Bool) -> EventLoopFuture<Void> {
        guard let layer = http else { return channel.eventLoop.makeSucceededVoidFuture() }
        http = nil
        if !keepingEncoder { ops.removeHandler(layer.encoder, promise: nil) }
        ops.removeHandler(layer.connection, promise: nil)
        ops.removeHandler(layer.exchange, promise: nil)
        let decoderGone = channel.eventLoop.makePromise(of: Void.self)
        ops.removeHandler(layer.decoder, promise: decoderGone)
        ops.removeHandler(layer.tap, promise: nil)
        if keepingEncoder { pendingEncoder = layer.encoder }
        return decoderGone.futureResult
    }

    /// The encoder kept for the router's answer to a CONNECT.
    private var pendingEncoder: HTTPResponseEncoder?

    func removeKeptEncoder() {
        if let encoder = pendingEncoder { ops.removeHandler(encoder, promise: nil) }
        pendingEncoder = nil
    }

    // MARK: CONNECT

    /// A CONNECT request has ended: the router takes the connection's bytes
    /// from here (it holds them while it dials) and the HTTP layer goes.
    func routeConnect(_ head: HTTPRequestHead, target: ProxyTarget, after exchange: HTTPExchangeHandler) {
        let router = ConnectionRouter(owner: self, entry: .connect(head, target))
        do {
            try ops.addHandler(router, position: .after(exchange))
        } catch {
            services.logger.error("cannot route a CONNECT", metadata: ["ERROR": "\(error)"])
            channel.close(promise: nil)
            return
        }
        removeHTTP(keepingEncoder: true)
        router.begin()
    }

    /// The router refused or failed: its reply went out; nothing more to read.
    func connectRefused() {
        removeKeptEncoder()
    }

    /// The host_override rule for a passed-through tunnel to `target`: a
    /// URL pattern matches it as https://host:port/, a filter as its row
    /// reads (`host:port`, the CONNECT's headers when it had some).
    func passThroughOverride(for target: ProxyTarget, headers: HTTPHeaders?) -> (address: String, rule: String)? {
        guard !services.rules.isEmpty else { return nil }
        let rules = services.rules.snapshot
        var exchange: FilterSubject?
        if rules.usesFilters {
            var tunnel = FilterSubject(
                method: "CONNECT", url: target.description, host: target.host.lowercased(), scheme: "tcp", tls: .passthrough)
            tunnel.requestHeaders = headers.map { $0.map { ($0.name, $0.value) } } ?? []
            tunnel.client = channel.remoteAddress.map(ExchangeCapture.describe)
            tunnel.device = services.peer.device
            exchange = tunnel
        }
        guard let rule = rules.firstOfEachKind(for: "https://\(target)/", exchange: exchange, only: .hostOverride).found[.hostOverride],
            case let .hostOverride(address) = rule.action
        else {
            return nil
        }
        return (address, rule.name)
    }

    /// Dials `target` for bytes that are only passed through (pinned to
    /// `override` when given), with reads off until glued so that a server
    /// that speaks first loses nothing. `done` runs on the loop, unless the
    /// client has gone meanwhile (the peer is then closed).
    func dialPassThrough(
        _ target: ProxyTarget, override: String?, _ done: @escaping (Result<(Channel, UpstreamDial.Tunnel), Error>) -> Void
    ) {
        let dial = UpstreamDial(target: target, proxy: services.interception.upstreamProxy(for: target.host))
        let client = channel
        let bound = NIOLoopBound(done, eventLoop: channel.eventLoop)
        services.connector.connect(dial, override: override, autoRead: false, halfClosure: true, on: channel.eventLoop) { _ in }
            .flatMap { peer in dial.tunnel(peer).map { (peer, $0) } }
            .whenComplete { result in
                guard client.isActive else {
                    if case let .success((peer, _)) = result { peer.close(promise: nil) }
                    return
                }
                bound.value(result)
            }
    }

    /// Glues the client to `peer` in place of `router`, which hands over
    /// the bytes it held. When `row` is captured, the bytes each way are
    /// counted and the hellos going past are read into it; it is written
    /// once both sides have closed.
    func passThrough(to peer: Channel, tunnel: UpstreamDial.Tunnel, row: TunnelCapture?, replacing router: some RemovableChannelHandler)
        throws
    {
        removeKeptEncoder()
        let counts = TunnelByteCounts()
        var activity: (@Sendable () -> Void)?
        if let presence = services.presence { activity = { presence.touch() } }
        let (stats, logger, seconds) = (services.stats, services.logger, services.timeouts.tunnelIdle)
        let server = peer.remoteAddress.map(ExchangeCapture.describe) ?? "?"
        let idle = GlueHandler.IdleLimit(after: .milliseconds(Int64(seconds * 1000))) {
            stats.tunnelClosedIdle()
            logger.info(
                "closed an idle tunnel",
                metadata: ["SERVER": "\(server)", "IDLE_SECONDS": "\(seconds)", "SETTING": "timeouts.tunnel_idle_seconds"])
        }
        let glue = counts.gluePair(stats: services.stats, activity: activity, idle: idle)
        var row = row
        row?.opened(to: peer.remoteAddress)
        let (hooks, opened) = (ExchangeHooks(services: services), row)
        channel.closeFuture.and(peer.closeFuture).whenComplete { _ in hooks.tunnelClosed(opened, counts: counts) }
        if row != nil {
            let client = TLSHelloSniffer(.client) { hello in counts.hello.withLock { $0.sni = hello.sni } }
            let server = TLSHelloSniffer(.server) { hello in
                counts.hello.withLock { ($0.version, $0.cipher) = (hello.version, hello.cipher) }
            }
            try ops.addHandler(client, position: .after(router))
            try ops.addHandler(glue.client, position: .after(client))
            try peer.pipeline.syncOperations.addHandler(server)
        } else {
            try ops.addHandler(glue.client, position: .after(router))
        }
        try peer.pipeline.syncOperations.addHandler(glue.server)
        ops.removeHandler(router, promise: nil)
        // Through upstream_proxy: what the server sent after the proxy's 200 goes to the glue now.
        tunnel.finish()
        peer.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in peer.close(promise: nil) }
    }

    /// The TLS interception layer with HTTP inside, in place of the router:
    /// the bytes it held (the ClientHello) go to TLS. When `h2` is offered
    /// (`proxy.http2`), the HTTP layer waits for what the client chose.
    /// `eager`: the origin connection dialled first (eager ALPN), for the first exchange.
    func intercept(
        _ target: ProxyTarget, serverContext: NIOSSLContext, upstream: UpstreamTLS, pinnedAddress: String? = nil,
        eager: EagerOrigin? = nil, replacing router: some RemovableChannelHandler
    ) throws {
        removeKeptEncoder()
        self.eager = eager
        let watcher = MITMHandler(target: target, services: services)
        let tls = NIOSSLServerHandler(context: serverContext)
        let raw = RawCloser()
        self.raw = raw
        try ops.addHandlers([raw, tls, watcher], position: .after(router))
        let route = ForwardRoute.intercepted(target, upstream)
        if upstream.http2 {
            let chooser = ALPNLayerChooser { [self] negotiated, chooser in
                if negotiated == "h2" {
                    let leg = try self.installHTTP2(route: route, pinnedAddress: pinnedAddress, position: .after(chooser))
                    // The streams share the origin connection dialled first.
                    if let eager = self.takeEagerOrigin() {
                        switch eager.connection {
                        case let .http2(connection, settled): leg.upstream.adoptEager(eager.key, connection, settled: settled)
                        case let .http1(parked): leg.upstream.adoptEager(eager.key, parked: parked)
                        }
                    }
                } else {
                    let exchange = try self.installHTTP(route: route, position: .after(chooser))
                    exchange.pinnedAddress = pinnedAddress
                    exchange.clientSNI = self.clientSNI
                }
            }
            try ops.addHandler(chooser, position: .after(watcher))
        } else {
            let exchange = try installHTTP(route: route, position: .after(watcher))
            exchange.pinnedAddress = pinnedAddress
        }
        let sniffer = TLSHelloSniffer(.client) { [weak self] hello in
            watcher.sni = hello.sni
            self?.clientSNI = hello.sni
            self?.http?.exchange.clientSNI = hello.sni
        }
        try ops.addHandler(sniffer, position: .after(router))
        ops.removeHandler(router, promise: nil)
    }

    /// The origin connection dialled before the client's handshake, once: the first exchange's to take or close.
    func takeEagerOrigin() -> EagerOrigin? {
        defer { eager = nil }
        return eager
    }

    // MARK: closing

    /// The client's TLS ended with a TCP FIN and no close_notify.
    func noteRaggedTLSEnd() {
        tlsEndedRaggedly = true
    }

    /// The client has had its last answer: close. A TLS client that hung up
    /// without close_notify is not waited for: NIOSSL would wait for its
    /// close_notify (`MITMContexts.shutdownTimeout`), which cannot come.
    func closeFinishedClient() {
        if tlsEndedRaggedly, let raw {
            raw.closeSocket()
        } else {
            channel.close(promise: nil)
        }
    }

    // MARK: 101

    /// After a `101` the client and the upstream stop speaking HTTP: both
    /// HTTP layers go and the bytes are glued. Outbound HTTP goes first on
    /// each side, so the bytes a decoder hands over on its way out meet the
    /// glue and nothing that expects HTTP parts.
    func switchProtocols(upstream: UpstreamLayer, glue: (client: GlueHandler, server: GlueHandler)) throws {
        guard let layer = http else { return }
        try ops.addHandler(glue.client, position: .after(layer.exchange))
        guard let peer = upstream.channel else { return }
        try peer.pipeline.syncOperations.addHandler(glue.server)
        upstream.removeOutbound()
        removeHTTP(keepingEncoder: false)
        upstream.removeDecoder()
        flushAfterSwitch(peer)
        // Reads held while HTTP was forwarded start again.
        channel.read()
        peer.read()
    }

    /// After a `101` to a WebSocket: each side's HTTP gives way to NIO's
    /// frame decoder and encoder and the session's relay, in the order and
    /// for the reason `switchProtocols` gives.
    func switchToWebSocket(upstream: UpstreamLayer, relays: (client: WebSocketRelay, server: WebSocketRelay)) throws {
        guard let layer = http, let peer = upstream.channel else { throw ChannelError.ioOnClosedChannel }
        try ops.addHandlers(
            [ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketLimits.frame)), WebSocketFrameWriter(), relays.client],
            position: .after(layer.exchange))
        try peer.pipeline.syncOperations.addHandlers([
            ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: WebSocketLimits.frame)),
            WebSocketFrameWriter(), relays.server,
        ])
        upstream.removeOutbound()
        removeHTTP(keepingEncoder: false)
        upstream.removeDecoder()
        let session = NIOLoopBound(relays.client.session, eventLoop: channel.eventLoop)
        channel.eventLoop.execute { session.value?.switched() }
        channel.read()
        peer.read()
    }

    /// Bytes that came with the 101 are handed on as the decoders go, with
    /// no read's end after them to flush them: a server that speaks first
    /// would wait for ever.
    private func flushAfterSwitch(_ peer: Channel) {
        let channel = channel
        channel.eventLoop.execute {
            channel.flush()
            peer.flush()
        }
    }
}
