import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Takes over a connection whose `CONNECT host:port` has ended, in place of
/// the HTTP layer (it keeps only the encoder, for its reply). It decides
/// (intercept or pass through), dials when passing through, answers, and
/// leaves: the owner puts the glue or the TLS layer in its place, and the
/// bytes that came meanwhile (the ClientHello) are handed on as it goes.
/// It reads nothing more while it decides. Shaped after swift-nio-examples'
/// connect-proxy.
final class ConnectRouter {
    private enum State {
        /// Dialling the target (pass through).
        case dialling
        /// Answered for interception: the client's first bytes say TLS, or plaintext (HTTP/1, h2c).
        case peeking(target: ProxyTarget, serverContext: NIOSSLContext, upstream: UpstreamTLS)
        /// Handing over; bytes still held are delivered on removal.
        case handingOver
        /// Refused or failed: answered, closing.
        case failed
    }

    private var state = State.dialling
    private let owner: ProxyPipeline
    private let head: HTTPRequestHead
    private let target: ProxyTarget
    private var logger: Logger
    private var services: ProxyServices { owner.services }
    /// The connection's hooks (its list was made with the connection).
    private let hooks: ExchangeHooks
    /// Bytes after the CONNECT, in order, and whether the client half-closed.
    private var held: [NIOAny] = []
    private var heldInputClosed = false
    private var readWithheld = false
    private var context: ChannelHandlerContext?
    /// A passed-through tunnel is one row: bytes each way and duration.
    private var tunnelCapture: TunnelCapture?

    init(owner: ProxyPipeline, head: HTTPRequestHead, target: ProxyTarget) {
        self.owner = owner
        hooks = ExchangeHooks(services: owner.services)
        self.head = head
        self.target = target
        logger = owner.services.logger
        logger[metadataKey: "HOST"] = "\(target.host)"
        logger[metadataKey: "REQUEST_ID"] = "\(RequestID.make())"
    }
}

extension ConnectRouter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = HTTPServerResponsePart

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Called by the owner once the HTTP layer has gone (but the encoder, for the answer).
    func begin() {
        guard let context else { return }
        switch services.interception.decide(host: target.host) {
        case let .intercept(contexts, upstream):
            // Upstream is dialled per request, after the client's handshake,
            // so an upstream failure can reach the client as a 502.
            logger.debug("CONNECT, intercepting", metadata: ["TARGET": "\(target)"])
            hooks.tunnelIntercepted()
            intercept(contexts, upstream, context: context)
        case let .passthrough(why):
            logger.debug("CONNECT, passing through", metadata: ["TARGET": "\(target)", "WHY": "\(why)"])
            dial(context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The decoder's left-over bytes and anything after: kept for the next layer.
        held.append(data)
        if case .peeking = state { peek(context: context) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            heldInputClosed = true
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        // Nothing is read while the next layer is not there (backpressure), but the first bytes to peek at.
        if case .peeking = state {
            context.read()
            return
        }
        readWithheld = true
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        let bytes = held
        held = []
        for data in bytes { context.fireChannelRead(data) }
        if !bytes.isEmpty { context.fireChannelReadComplete() }
        if heldInputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        if readWithheld, case .handingOver = state { context.read() }
        context.leavePipeline(removalToken: removalToken)
    }

    // MARK: pass through

    private func dial(context: ChannelHandlerContext) {
        tunnelCapture = hooks.tunnelOpened(head, target: target, client: context.channel.remoteAddress)
        let override = owner.passThroughOverride(for: target, headers: head.headers)
        if let override { tunnelCapture?.rule(override.rule) }
        owner.dialPassThrough(target, override: override?.address) { [self] result in
            guard let context = self.context else { return }
            switch result {
            case let .success((peer, tunnel)): glue(peer, tunnel: tunnel, context: context)
            case let .failure(error): dialFailed(error, context: context)
            }
        }
    }

    private func dialFailed(_ error: Error, context: ChannelHandlerContext) {
        let failure = ProxyError.connectFailed(host: target.host, port: target.port, underlying: error)
        logger.notice("CONNECT failed", metadata: ["ERROR": "\(failure)"])
        tunnelCapture?.failed(failure.description)
        tunnelCapture = nil
        fail(failure, context: context)
    }

    private func fail(_ failure: ProxyError, context: ChannelHandlerContext) {
        state = .failed
        ProxyReply.write(failure.status, "Busymate: \(failure)", close: true, context: context, wrap: Self.wrapOutboundOut)
        owner.connectRefused()
    }

    private func glue(_ peer: Channel, tunnel: UpstreamDial.Tunnel, context: ChannelHandlerContext) {
        writeEstablished(context: context)
        tunnelCapture?.established()
        state = .handingOver
        do {
            try owner.passThrough(to: peer, tunnel: tunnel, row: tunnelCapture, replacing: self)
            logger.debug("CONNECT glued", metadata: ["TARGET": "\(target)"])
        } catch {
            peer.close(mode: .all, promise: nil)
            context.close(promise: nil)
        }
    }

    // MARK: intercept

    private func intercept(_ contexts: MITMContexts, _ upstream: UpstreamTLS, context: ChannelHandlerContext) {
        let serverContext: NIOSSLContext
        do {
            serverContext = try contexts.serverContext(for: target.host, http2: upstream.http2)
        } catch {
            let failure = ProxyError.certificate(host: target.host, detail: "\(error)")
            logger.error("cannot intercept", metadata: ["ERROR": "\(failure)"])
            fail(failure, context: context)
            return
        }
        writeEstablished(context: context)
        state = .peeking(target: target, serverContext: serverContext, upstream: upstream)
        // A client that sends nothing is closed as a handshake that never finished would be.
        let seconds = services.timeouts.tlsHandshake
        context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
            guard case .peeking = state, let context = self.context else { return }
            state = .failed
            // As MITMHandler says of a handshake that never finishes: our own hang-up, one row, no pin.
            let why = "the client's TLS handshake did not finish within \(ClientTimeoutHandler.format(seconds)) s (timeouts.tls_handshake_seconds)"
            logger.notice("closed a TLS handshake that did not finish", metadata: ["WHY": "\(why)"])
            hooks.handshakeRefused(target, sni: nil, client: context.channel.remoteAddress, why: why)
            context.close(promise: nil)
        }
        peek(context: context)
    }

    /// A client that speaks TLS in the tunnel is intercepted; one that
    /// speaks plaintext HTTP/1 or h2c (curl `--proxytunnel` to an http://
    /// URL, grpcio's plaintext channel through a proxy) is read as HTTP to
    /// the CONNECT's target, not refused as a failed handshake.
    private func peek(context: ChannelHandlerContext) {
        guard case let .peeking(target, serverContext, upstream) = state else { return }
        var seen = ByteBuffer()
        for data in held {
            // Bytes from the socket (and the decoder's left-over bytes): buffers only.
            var bytes = TLSHelloSniffer.unwrapInboundIn(data)
            seen.writeBuffer(&bytes)
        }
        guard let first = seen.getInteger(at: seen.readerIndex, as: UInt8.self) else {
            context.read()
            return
        }
        let h2c = services.interception.http2 ? H2CPreface.matches(seen) : false
        if first != 0x16 && h2c == nil { return }
        state = .handingOver
        do {
            if first == 0x16 {
                try owner.intercept(target, serverContext: serverContext, upstream: upstream, replacing: self)
            } else if h2c == true {
                logger.debug("plaintext HTTP/2 inside a CONNECT", metadata: ["TARGET": "\(target)"])
                try owner.transparentH2C(target, pinnedAddress: nil, replacing: self)
            } else {
                logger.debug("plaintext HTTP inside a CONNECT", metadata: ["TARGET": "\(target)"])
                try owner.transparentHTTP(target, pinnedAddress: nil, replacing: self)
            }
        } catch {
            logger.error("cannot set up interception", metadata: ["ERROR": "\(error)"])
            context.close(promise: nil)
        }
    }

    private func writeEstablished(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Via", value: "1.1 \(LoopGuard.shared.pseudonym)")
        let head = HTTPResponseHead(version: .http1_1, status: .custom(code: 200, reasonPhrase: "Connection Established"), headers: headers)
        context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }
}
