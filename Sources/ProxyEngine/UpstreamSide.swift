import BusymateShared
import NIOCore
import NIOHTTP1
import NIOSSL
import NIOTLS

/// The server side of one client connection: one upstream connection at a
/// time, reused while requests go to the same place over the same kind of
/// connection (as mitmproxy does), dialled through the `UpstreamConnector`.
/// Parts written while it dials wait in order; the client is not read
/// meanwhile. It also keeps the upstream response deadline. Confined to
/// the connection's event loop.
final class UpstreamSide {
    private enum State {
        case none
        case connecting(Key, pending: [HTTPClientRequestPart])
        case connected(Key, Channel, UpstreamLayer)
    }

    /// What an upstream connection is for: reused only for the same.
    struct Key: Equatable {
        var target: ProxyTarget
        var secure: Bool
        var chained: Bool
    }

    private var state = State.none
    /// Weak: a dial or a timer may outlive the connection's handler.
    private weak var exchange: HTTPExchangeHandler?
    private let services: ProxyServices
    private let route: ForwardRoute
    /// What the server chose, for the connection in use.
    private(set) var hello: TLSHello?

    /// `timeouts.upstream_response_seconds`: from a request's end going
    /// upstream to its response head.
    private lazy var responseDeadline = MovingDeadline { [weak self] in self?.timedOut() }

    init(exchange: HTTPExchangeHandler, services: ProxyServices, route: ForwardRoute) {
        self.exchange = exchange
        self.services = services
        self.route = route
    }

    var isConnected: Bool { if case .connected = state { true } else { false } }

    /// Whether the client must wait: nothing can be sent yet, or the server cannot take more.
    var holdsClientReads: Bool {
        switch state {
        case .connecting: return true
        case let .connected(_, channel, _): return !channel.isWritable
        case .none: return false
        }
    }

    /// Sends `request`'s head, dialling when the connection in use goes elsewhere.
    func begin(_ request: UpstreamRequest, override: String?, context: ChannelHandlerContext) {
        let key = Key(target: request.destination, secure: request.secure, chained: request.chained != nil)
        switch state {
        case let .connected(current, channel, _) where current == key && channel.isActive:
            send(.head(request.head))
        default:
            close()
            connect(key, via: request.chained, first: .head(request.head), override: override, context: context)
        }
    }

    func send(_ part: HTTPClientRequestPart) {
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
        case .none:
            break
        }
    }

    func flush() {
        if case let .connected(_, channel, _) = state { channel.flush() }
    }

    func close() {
        stopTimer()
        if case let .connected(_, channel, layer) = state {
            layer.handler.detach()
            channel.close(promise: nil)
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
        if case let .connected(_, _, layer) = state { layer.handler.clientBecameWritable() }
    }

    // MARK: dialling

    /// `override`: the address a host_override rule gives the target's name.
    /// `proxy`: `upstream_proxy`, when this dial goes through it (TLS after a
    /// CONNECT; plain requests in absolute-form). It resolves names, so a
    /// host_override does not apply then.
    private func connect(_ key: Key, via proxy: UpstreamProxySetting?, first: HTTPClientRequestPart, override: String?, context: ChannelHandlerContext) {
        let target = key.target
        let tls: NIOSSLContext?
        if key.secure {
            let upstreamTLS: UpstreamTLS? = { if case let .intercepted(_, upstreamTLS) = route { upstreamTLS } else { services.interception.upstreamTLS } }()
            guard let upstreamTLS else {
                exchange?.fail(.connectFailed(host: target.host, port: target.port, underlying: ProxyError.NoUpstreamTLS()), context: context)
                return
            }
            tls = upstreamTLS.context(for: target.host).context
        } else {
            tls = nil
        }
        state = .connecting(key, pending: [first])
        hello = nil
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        guard let exchange else { return }
        let layer = NIOLoopBound(UpstreamLayer(handler: UpstreamHandler(exchange: exchange)), eventLoop: context.eventLoop)
        // SNI carries names only, never IP literals.
        let serverName = IPAddressText.isLiteral(target.host) ? nil : target.host
        let dial = UpstreamDial(target: target, proxy: proxy)
        /// TLS goes first in the pipeline; through a proxy, only once CONNECT is answered.
        @Sendable func addTLS(_ channel: Channel) throws {
            guard let tls else { return }
            let ops = channel.pipeline.syncOperations
            try ops.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName), position: .first)
            try ops.addHandler(TLSHelloSniffer(.server) { hello in layer.value.handler.serverHello(hello) }, position: .first)
        }
        services.connector.connect(dial, override: override, autoRead: true, halfClosure: false, on: context.eventLoop) { channel in
            if proxy == nil { try addTLS(channel) }
            try layer.value.install(on: channel)
        }
        .flatMap { channel in
            // Plain requests through an HTTP proxy need no tunnel: they go in absolute-form.
            guard let proxy, tls != nil || proxy.scheme == .socks5 else { return channel.eventLoop.makeSucceededFuture(channel) }
            return dial.tunnel(channel).flatMapThrowing { tunnel in
                try addTLS(channel)
                tunnel.finish()
                return channel
            }
        }
        .whenComplete { result in
            bound.value.connectFinished(key, result, layer: layer.value)
        }
    }

    private func connectFinished(_ key: Key, _ result: Result<Channel, Error>, layer: UpstreamLayer) {
        guard case let .connecting(current, pending) = state, current == key, let exchange, let context = exchange.context else {
            if case let .success(channel) = result { channel.close(promise: nil) }
            return
        }
        switch result {
        case let .success(channel):
            exchange.hooks.upstreamConnected(to: channel.remoteAddress)
            state = .connected(key, channel, layer)
            for part in pending { channel.write(part, promise: nil) }
            channel.flush()
            if pending.contains(where: { if case .end = $0 { true } else { false } }) { startTimer() }
            exchange.resumeClientReads()
        case let .failure(error):
            state = .none
            exchange.fail(ProxyError.connectFailed(host: key.target.host, port: key.target.port, underlying: error), context: context)
            exchange.resumeClientReads()
        }
    }

    // MARK: events from the upstream handler

    func serverHello(_ hello: TLSHello, from handler: UpstreamHandler) {
        switch state {
        case let .connected(_, _, layer) where layer.handler === handler: break
        case .connecting: break
        default: return
        }
        self.hello = hello
        exchange?.hooks.upstreamTLS(hello, doneAt: nil)
    }

    func handshakeDone(_ handler: UpstreamHandler) {
        guard case let .connected(_, _, layer) = state, layer.handler === handler else { return }
        exchange?.hooks.upstreamTLS(hello, doneAt: .now)
    }

    func keepAliveEnded(_ handler: UpstreamHandler) {
        if case let .connected(_, _, layer) = state, layer.handler === handler { close() }
    }

    func closed(_ handler: UpstreamHandler, error: Error?) {
        guard case let .connected(key, _, layer) = state, layer.handler === handler else { return }
        stopTimer()
        state = .none
        exchange?.upstreamClosed(key.target, error: error)
    }

    // MARK: the response deadline

    func startTimer() {
        guard let context = exchange?.context else { return }
        responseDeadline.set(after: .milliseconds(Int64(services.timeouts.upstreamResponse * 1000)), on: context.eventLoop)
    }

    func stopTimer() {
        responseDeadline.clear()
    }

    private func timedOut() {
        guard let exchange, let context = exchange.context, exchange.machine.response == .waiting, !exchange.machine.isIdle else { return }
        let target: ProxyTarget? = {
            switch state {
            case let .connected(key, _, _), let .connecting(key, _): return key.target
            case .none: return nil
            }
        }()
        exchange.fail(.upstreamTimedOut(host: target?.host ?? "the server", port: target?.port ?? 0, seconds: services.timeouts.upstreamResponse),
                      context: context)
    }

    /// When the client's connection ends: a pending check would keep it alive until it fired.
    func cancelTimer() {
        responseDeadline.cancel()
    }
}

/// The upstream channel's last handler: hands response parts over and
/// holds upstream reads while the client cannot take more.
final class UpstreamHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var exchange: HTTPExchangeHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var methods: [HTTPMethod] = []
    private var responseKeepAlive = true
    private var failure: Error?

    init(exchange: HTTPExchangeHandler) { self.exchange = exchange }

    func detach() { exchange = nil }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case let .head(head) = Self.unwrapOutboundIn(data) { methods.append(head.method) }
        context.write(data, promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = Self.unwrapInboundIn(data)
        switch part {
        case let .head(head): responseKeepAlive = head.isKeepAlive
        case .end: if !methods.isEmpty { methods.removeFirst() }
        case .body: break
        }
        let exchange = self.exchange
        // Let go of a connection the server is closing before the end goes
        // out: writing it may hand a pipelined request over at once.
        if case .end = part, !responseKeepAlive { exchange?.upstream.keepAliveEnded(self) }
        exchange?.upstreamResponse(part)
    }

    func channelReadComplete(context: ChannelHandlerContext) { exchange?.context?.flush() }

    func channelInactive(context: ChannelHandlerContext) { exchange?.upstream.closed(self, error: failure) }

    func serverHello(_ hello: TLSHello) { exchange?.upstream.serverHello(hello, from: self) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { exchange?.upstream.handshakeDone(self) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failure = error
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { exchange?.resumeClientReads() }
    }

    func read(context: ChannelHandlerContext) {
        if exchange?.clientIsWritable ?? true {
            context.read()
        } else {
            pendingRead = true
        }
    }

    func clientBecameWritable() {
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }
}
