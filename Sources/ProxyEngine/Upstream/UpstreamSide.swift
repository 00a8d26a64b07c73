import BusymateShared
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import NIOTLS

/// The server side of one client connection: one upstream connection at a
/// time, reused while requests go to the same place over the same kind of
/// connection (as mitmproxy does), dialled through the `UpstreamConnector`.
/// Parts written while it dials wait in order; the client is not read
/// meanwhile. It also keeps the upstream response deadline. Confined to
/// the connection's event loop.
final class UpstreamSide {
    enum State {
        case none
        case connecting(Key, pending: [HTTPClientRequestPart])
        case connected(Key, Channel, UpstreamLayer)
        /// A stream of an origin HTTP/2 connection (the pool's), one per exchange.
        case streaming(Key, OriginStream)
    }

    /// What an upstream connection is for: reused only for the same. The
    /// address a host_override rule (or a redirected connection's pin)
    /// sends the name to is part of it: a request moved elsewhere does not
    /// ride a connection dialled to where the name resolves.
    struct Key: Hashable {
        var target: ProxyTarget
        var secure: Bool
        var chained: Bool
        var override: String?
    }

    var state = State.none
    /// Weak: a dial or a timer may outlive the connection's handler.
    weak var delegate: (any UpstreamDelegate)?
    let services: ProxyServices
    let route: ForwardRoute
    let eventLoop: EventLoop
    /// The client connection's HTTP/2 layer, when the exchange is one of its streams.
    let leg: HTTP2ClientLeg?
    /// What the server chose, for the connection in use.
    var hello: TLSHello?

    /// `timeouts.upstream_response_seconds`: from a request's end going
    /// upstream to its response head.
    /// A stream of an HTTP/2 client keeps it in its connection's group instead.
    lazy var responseDeadline = MovingDeadline { [weak self] in self?.timedOut() }
    private lazy var groupedDeadline: Int? = leg?.responseDeadlines.makeID()

    init(delegate: any UpstreamDelegate, services: ProxyServices, route: ForwardRoute, leg: HTTP2ClientLeg?, eventLoop: EventLoop) {
        self.delegate = delegate
        self.services = services
        self.route = route
        self.leg = leg
        self.eventLoop = eventLoop
    }

    var clientIsWritable: Bool { delegate?.clientIsWritable ?? false }

    func report(_ event: UpstreamEvent) { delegate?.upstream(event) }

    /// A dial ended without a connection: the exchange hears why, and its client is read again.
    func dialFailed(_ error: ProxyError) {
        state = .none
        report(.failed(error))
    }

    var isConnected: Bool { if case .connected = state { true } else { false } }

    /// Whether the client must wait: nothing can be sent yet, or the server cannot take more.
    var holdsClientReads: Bool {
        switch state {
        case .connecting: return true
        case let .connected(_, channel, _): return !channel.isWritable
        case let .streaming(_, stream): return !stream.isWritable
        case .none: return false
        }
    }

    /// Sends `request`'s head, dialling when the connection in use goes elsewhere.
    /// A stream of an HTTP/2 client opens a stream on its connection's
    /// HTTP/2 origin connection (dialling it when there is none).
    /// `eager`: the origin connection dialled before the client's handshake,
    /// offered to an HTTP/1 client's first exchange (taken when it fits, else closed).
    func begin(_ request: UpstreamRequest, override: String?, eager: EagerOrigin? = nil) {
        let key = Key(target: request.destination, secure: request.secure, chained: request.chained != nil, override: override)
        retry = StreamRetry()
        switch state {
        case let .connected(current, channel, _) where current == key && channel.isActive:
            eager?.close()
            send(.head(request.head))
            return
        default:
            close()
        }
        if leg != nil { retry.sent(.head(request.head)) }
        if let eager {
            if eager.fits(key), case let .http1(parked) = eager.connection {
                state = .connecting(key, pending: [.head(request.head)])
                adopt(parked, key: key)
                return
            }
            eager.close()
        }
        let dial = Dial(key: key, proxy: request.chained, override: override)
        guard let leg, let offer = http2Offer(key, leg: leg, request: request) else {
            connect(dial, first: .head(request.head), offer: nil)
            return
        }
        state = .connecting(key, pending: [.head(request.head)])
        pooledDial = (dial, offer, leg.upstream)
        askPool()
    }

    /// For a stream of an HTTP/2 client: the dial, the offer and the pool it goes through.
    var pooledDial: (dial: Dial, offer: HTTP2Offer, pool: UpstreamHTTP2Pool)?
    var retriedStream = false
    /// The exchange's stream on an origin HTTP/2 connection, kept for a retry the origin may call for.
    var retry = StreamRetry()

    func send(_ part: HTTPClientRequestPart) {
        if leg != nil { retry.sent(part) }
        switch state {
        case .connecting(let key, var pending):
            state = .none
            pending.append(part)
            state = .connecting(key, pending: pending)
        case let .connected(_, channel, _):
            if case .end = part {
                channel.writeAndFlush(part, promise: nil)
                startTimer()
            } else {
                channel.write(part, promise: nil)
            }
        case let .streaming(_, stream):
            stream.write(part)
            if case .end = part {
                stream.flush()
                startTimer()
            }
        case .none:
            break
        }
    }

    func flush() {
        switch state {
        case let .connected(_, channel, _): channel.flush()
        case let .streaming(_, stream): stream.flush()
        case .connecting, .none: break
        }
    }

    func close() {
        stopTimer()
        if case let .streaming(_, stream) = state {
            stream.delegate = nil
            stream.close()
        }
        if case let .connected(key, channel, layer) = state {
            layer.handler.detach()
            // A stream of an HTTP/2 client leaves its finished HTTP/1.1 connection to the next stream.
            if let pool = pooledDial?.pool, layer.handler.isReusable, delegate?.exchangeIsIdle ?? false, channel.isActive {
                pool.park(key, UpstreamHTTP2Pool.Parked(channel: channel, layer: layer, hello: hello))
            } else {
                channel.close(promise: nil)
            }
        }
        state = .none
    }

    /// For the switch after a `101`: the connection leaves this side.
    func detachForSwitch() -> (Channel, UpstreamLayer)? {
        guard case let .connected(_, channel, layer) = state else { return nil }
        stopTimer()
        state = .none
        layer.handler.detach()
        return (channel, layer)
    }

    func clientBecameWritable() {
        switch state {
        case let .connected(_, _, layer): layer.handler.clientBecameWritable()
        case let .streaming(_, stream): stream.clientBecameWritable()
        case .connecting, .none: break
        }
    }

    // MARK: dialling

    /// `override`: the address a host_override rule gives the target's name.
    /// `proxy`: `upstream_proxy`, when this dial goes through it (TLS after a
    /// CONNECT; plain requests in absolute-form). It resolves names, so a
    /// host_override does not apply then. With `offer`, the connection is
    /// HTTP/2 if the origin takes it, and is then `pool`'s.
    func connect(_ dial: Dial, first: HTTPClientRequestPart, offer: HTTP2Offer?, pool: UpstreamHTTP2Pool? = nil) {
        let (key, proxy) = (dial.key, dial.proxy)
        let target = key.target
        let tls: NIOSSLContext?
        if key.secure {
            let upstreamTLS: UpstreamTLS? = {
                if case let .intercepted(_, upstreamTLS) = route { upstreamTLS } else { services.interception.upstreamTLS }
            }()
            guard let upstreamTLS else {
                pool?.dialled(key, .failure(ProxyError.NoUpstreamTLS()))
                dialFailed(.connectFailed(host: target.host, port: target.port, underlying: ProxyError.NoUpstreamTLS()))
                return
            }
            tls = upstreamTLS.context(for: target.host, offeringH2: offer == .alpn).context
        } else {
            tls = nil
        }
        // Parts already queued for this destination (while the pool dialled) stay queued.
        if case let .connecting(queuedFor, _) = state, queuedFor == key {} else { state = .connecting(key, pending: [first]) }
        hello = nil
        let eventLoop = self.eventLoop
        let bound = NIOLoopBound((self, pool), eventLoop: eventLoop)
        let layer = NIOLoopBound(UpstreamLayer(handler: UpstreamHandler(side: self)), eventLoop: eventLoop)
        let upstreamDial = UpstreamDial(target: target, proxy: proxy)
        // What the origin chose decides the layer: it goes in once the handshake is done, which is part of this dial.
        let alpn: EventLoopPromise<String?>? = offer == .alpn ? eventLoop.makePromise() : nil
        if let alpn { OriginTLSHandshake.bound(alpn, seconds: services.timeouts.tlsHandshake, on: eventLoop) }
        /// TLS goes first in the pipeline; through a proxy, only once CONNECT is answered.
        @Sendable func addTLS(_ channel: Channel) throws {
            guard let tls else { return }
            try OriginTLSHandshake.add(to: channel, context: tls, host: target.host, alpn: alpn) { hello in
                layer.value.handler.serverHello(hello)
            }
        }
        services.connector.connect(upstreamDial, override: dial.override, autoRead: true, halfClosure: false, on: eventLoop) { channel in
            if proxy == nil { try addTLS(channel) }
            if offer == nil { try layer.value.install(on: channel) }
        }
        .flatMap { channel in
            // Plain requests through an HTTP proxy need no tunnel: they go in absolute-form.
            guard let proxy, tls != nil || proxy.scheme == .socks5 else { return channel.eventLoop.makeSucceededFuture(channel) }
            return upstreamDial.tunnel(channel).flatMapThrowing { tunnel in
                try addTLS(channel)
                tunnel.finish()
                return channel
            }
        }
        .flatMap { channel -> EventLoopFuture<(Channel, String?)> in
            switch offer {
            case .alpn?:
                guard let alpn else { return channel.eventLoop.makeSucceededFuture((channel, nil)) }
                return alpn.futureResult.map { (channel, $0) }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            case .priorKnowledge?: return channel.eventLoop.makeSucceededFuture((channel, "h2"))
            case nil: return channel.eventLoop.makeSucceededFuture((channel, nil))
            }
        }
        .whenComplete { result in
            if case .failure = result { alpn?.fail(ChannelError.ioOnClosedChannel) }
            let (side, pool) = bound.value
            side.connectFinished(key, result, layer: layer.value, offered: offer != nil, pool: pool)
        }
    }

    func connectFinished(
        _ key: Key, _ result: Result<(Channel, String?), Error>, layer: UpstreamLayer, offered: Bool, pool: UpstreamHTTP2Pool?
    ) {
        guard case let .connecting(current, pending) = state, current == key, delegate != nil else {
            if case let .success((channel, negotiated)) = result {
                // A pool's dial stays useful to the streams waiting on it.
                if let pool, negotiated == "h2",
                    let (connection, settled) = try? Self.http2Connection(channel, hello: hello, services: services)
                {
                    whenSettled(settled, connection, key: key, pool: pool)
                } else {
                    pool?.dialled(key, .success(nil))
                    channel.close(promise: nil)
                }
            } else if case let .failure(error) = result {
                pool?.dialled(key, .failure(error))
            }
            return
        }
        switch result {
        case let .success((channel, "h2")):
            do {
                let (connection, settled) = try Self.http2Connection(channel, hello: hello, services: services)
                report(.connected(server: channel.remoteAddress))
                if key.secure { report(.tls(hello, doneAt: .now)) }
                whenSettled(settled, connection, key: key, pool: pool)
            } catch {
                channel.close(promise: nil)
                pool?.dialled(key, .failure(error))
                dialFailed(Self.dialFailure(key.target, error))
            }
        case let .success((channel, _)):
            if offered {
                // The origin chose HTTP/1.1: its layer goes in before the bytes that follow the handshake.
                do {
                    try layer.install(on: channel)
                } catch {
                    channel.close(promise: nil)
                    pool?.dialled(key, .failure(error))
                    dialFailed(Self.dialFailure(key.target, error))
                    return
                }
                pool?.dialled(key, .success(nil))
                if key.secure { report(.tls(hello, doneAt: .now)) }
            }
            report(.connected(server: channel.remoteAddress))
            // An HTTP/1.1 connection of its own: no stream for an origin's GOAWAY to refuse.
            retry.notOnAStream()
            state = .connected(key, channel, layer)
            for part in pending { channel.write(part, promise: nil) }
            channel.flush()
            if pending.contains(where: { if case .end = $0 { true } else { false } }) { startTimer() }
            report(.ready)
        case let .failure(error):
            pool?.dialled(key, .failure(error))
            dialFailed(Self.dialFailure(key.target, error))
        }
    }

    /// What a failed dial tells the client: a refused TLS handshake (the
    /// origin's certificate, when `h2` was offered and the handshake is part
    /// of the dial) in the same words as one that failed after the connect.
    static func dialFailure(_ target: ProxyTarget, _ error: Error) -> ProxyError {
        if let tls = error as? NIOSSLError {
            return .upstreamTLS(host: target.host, port: target.port, detail: ProxyError.describeTLS(tls))
        }
        return .connectFailed(host: target.host, port: target.port, underlying: error)
    }

    // MARK: events from the upstream handler

    func serverHello(_ hello: TLSHello, from handler: UpstreamHandler) {
        switch state {
        case let .connected(_, _, layer) where layer.handler === handler: break
        case .connecting: break
        default: return
        }
        self.hello = hello
        report(.tls(hello, doneAt: nil))
    }

    func handshakeDone(_ handler: UpstreamHandler) {
        guard case let .connected(_, _, layer) = state, layer.handler === handler else { return }
        report(.tls(hello, doneAt: .now))
    }

    /// A response part; `lastOnConnection`: the server closes the connection after it.
    func received(_ part: HTTPClientResponsePart, lastOnConnection: Bool, from handler: UpstreamHandler) {
        // Let go of a connection the server is closing before the end goes
        // out: writing it may hand a pipelined request over at once.
        if case .end = part, lastOnConnection, case let .connected(_, _, layer) = state, layer.handler === handler { close() }
        if case .head = part { retry.responseHead() }
        report(.response(part))
    }

    func readComplete(from handler: UpstreamHandler) { report(.readComplete) }

    func serverWritable(_ handler: UpstreamHandler) { report(.ready) }

    func closed(_ handler: UpstreamHandler, error: Error?) {
        guard case let .connected(key, _, layer) = state, layer.handler === handler else { return }
        stopTimer()
        state = .none
        report(.closed(key.target, error))
    }

    // MARK: the response deadline

    func startTimer() {
        let due = eventLoop.now + .milliseconds(Int64(services.timeouts.upstreamResponse * 1000))
        if let leg, let id = groupedDeadline {
            leg.responseDeadlines.set(id, at: due) { [weak self] in self?.timedOut() }
        } else {
            responseDeadline.set(at: due, on: eventLoop)
        }
    }

    func stopTimer() {
        if let leg, let id = groupedDeadline {
            leg.responseDeadlines.clear(id)
        } else {
            responseDeadline.clear()
        }
    }

    private func timedOut() {
        let target: ProxyTarget? = {
            switch state {
            case let .connected(key, _, _), let .connecting(key, _), let .streaming(key, _): return key.target
            case .none: return nil
            }
        }()
        report(
            .timedOut(
                .upstreamTimedOut(host: target?.host ?? "the server", port: target?.port ?? 0, seconds: services.timeouts.upstreamResponse))
        )
    }

    /// When the client's connection ends: a pending check would keep it alive until it fired.
    func cancelTimer() {
        if let leg, let id = groupedDeadline {
            leg.responseDeadlines.clear(id)
        } else {
            responseDeadline.cancel()
        }
    }
}
