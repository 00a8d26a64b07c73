import BusymateShared
import NIOCore
import NIOSSL

extension EagerOrigin {
    /// Dials `target` over TLS offering `offer` (the client's own list of
    /// `h2` and `http/1.1`), the whole dial bounded by
    /// `timeouts.tls_handshake_seconds`. Once the handshake says what the
    /// origin chose, the layer for it goes in before the bytes that follow.
    /// `done` runs once, on `eventLoop`; a connection that comes after a
    /// failure or the deadline is closed. `peer`: a TCP connection to the
    /// target already open (SOCKS5's, on `eventLoop`, reads off), used
    /// instead of dialling.
    static func dial(
        _ target: ProxyTarget, override: String?, over peer: Channel? = nil, offer: [String], upstreamTLS: UpstreamTLS,
        services: ProxyServices, on eventLoop: EventLoop, done: @escaping (Result<EagerOrigin, Error>) -> Void
    ) {
        let key = UpstreamSide.Key(target: target, secure: true, chained: false, override: override)
        let pending = NIOLoopBoundBox<((Result<EagerOrigin, Error>) -> Void)?>(done, eventLoop: eventLoop)
        @Sendable func finish(_ result: Result<EagerOrigin, Error>) {
            guard let done = pending.value else {
                if case let .success(origin) = result { origin.close() }
                return
            }
            pending.value = nil
            done(result)
        }
        let tls = upstreamTLS.context(for: target.host, offering: offer).context
        let hello = NIOLoopBoundBox<TLSHello?>(nil, eventLoop: eventLoop)
        let alpn = eventLoop.makePromise(of: String?.self)
        let seconds = services.timeouts.tlsHandshake
        let timer = eventLoop.scheduleTask(in: .milliseconds(Int64(seconds * 1000))) {
            alpn.fail(UpstreamHandshakeTimeout(seconds: seconds))
            finish(.failure(UpstreamHandshakeTimeout(seconds: seconds)))
        }
        @Sendable func initialize(_ channel: Channel) throws {
            try OriginTLSHandshake.add(to: channel, context: tls, host: target.host, alpn: alpn) { found in hello.value = found }
        }
        let connected: EventLoopFuture<Channel>
        if let peer {
            // Read as a dialled origin connection is: from now on, and closed when the origin closes.
            connected = peer.eventLoop.makeCompletedFuture { try initialize(peer) }
                .flatMap { peer.setOption(ChannelOptions.allowRemoteHalfClosure, value: false) }
                .flatMap { peer.setOption(ChannelOptions.autoRead, value: true) }
                .map { peer }
                .flatMapErrorThrowing { error in
                    peer.close(promise: nil)
                    throw error
                }
        } else {
            connected = services.connector.connect(
                UpstreamDial(target: target, proxy: nil), override: override, autoRead: true,
                halfClosure: false, on: eventLoop, initialize: initialize)
        }
        connected.flatMap { channel in
            alpn.futureResult.map { (channel, $0) }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }
        .whenComplete { result in
            timer.cancel()
            switch result {
            case let .success((channel, negotiated)):
                // Inline with the handshake's end: nothing the origin sends next is missed.
                do {
                    let connection = try Self.layer(for: negotiated, on: channel, hello: hello.value, services: services)
                    finish(.success(EagerOrigin(key: key, connection: connection)))
                } catch {
                    channel.close(promise: nil)
                    finish(.failure(error))
                }
            case let .failure(error):
                alpn.fail(error)
                finish(.failure(error))
            }
        }
    }

    private static func layer(for negotiated: String?, on channel: Channel, hello: TLSHello?, services: ProxyServices) throws -> Connection
    {
        if negotiated == "h2" {
            let (connection, settled) = try UpstreamSide.http2Connection(channel, hello: hello, services: services)
            return .http2(connection, settled: settled)
        }
        let layer = UpstreamLayer(handler: UpstreamHandler())
        try layer.install(on: channel)
        return .http1(UpstreamHTTP2Pool.Parked(channel: channel, layer: layer, hello: hello))
    }
}
