import BusymateShared
import CaptureStore
import Foundation
import Synchronization
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Answers `CONNECT host:port`. For a host on the SSL-proxying list it
/// replies 200 and hands the connection to the intercepting stack
/// (`MITMHandler`); otherwise it dials the host, replies 200, takes the HTTP
/// handlers out and glues the two sockets together. Any other request
/// passes on to `HTTPForwardHandler`. Shaped after swift-nio-examples'
/// connect-proxy.
final class ConnectHandler {
    private enum State {
        /// No CONNECT under way; HTTP parts pass through.
        case idle
        /// Saw the CONNECT head, dialing; waiting for the request's end.
        case beganConnecting
        /// The request ended before the dial finished.
        case awaitingConnection(pendingBytes: [NIOAny])
        /// The dial finished before the request's end arrived.
        case awaitingEnd(connectResult: Channel)
        /// Intercepting: nothing to dial yet, waiting for the request's end.
        case interceptAwaitingEnd(MITMContexts, UpstreamTLS)
        /// Glued; bytes that arrived in between are delivered on removal.
        case upgradeComplete(pendingBytes: [NIOAny])
        case upgradeFailed
    }

    private var state = State.idle
    private var target: ProxyTarget?
    private var logger: Logger
    private let stats: TrafficStats
    private let interception: Interception
    private let rules: RuleEngine
    private let breakpoints: BreakpointController
    private let capture: CaptureWriter?
    /// The client shut its write side before the layer after us was in place.
    private var inputClosedEarly = false
    /// A passed-through tunnel is one row: bytes each way and duration.
    private var tunnelRecord: ExchangeRecord?

    private let timeouts: AppSettings.Timeouts

    init(logger: Logger, stats: TrafficStats, interception: Interception, rules: RuleEngine, breakpoints: BreakpointController, capture: CaptureWriter?,
         timeouts: AppSettings.Timeouts = .init()) {
        self.timeouts = timeouts
        self.logger = logger
        self.stats = stats
        self.interception = interception
        self.rules = rules
        self.breakpoints = breakpoints
        self.capture = capture
    }
}

extension ConnectHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .idle:
            // Only a CONNECT head changes anything here.
            guard case let .head(head) = Self.unwrapInboundIn(data), head.method == .CONNECT else {
                context.fireChannelRead(data)
                return
            }
            handleConnectHead(head, context: context)
        case .beganConnecting:
            if case .end = Self.unwrapInboundIn(data) {
                state = .awaitingConnection(pendingBytes: [])
                removeDecoder(context: context)
            }
        case let .awaitingEnd(peer):
            if case .end = Self.unwrapInboundIn(data) {
                state = .upgradeComplete(pendingBytes: [])
                removeDecoder(context: context)
                glue(peer, context: context)
            }
        case let .interceptAwaitingEnd(contexts, upstream):
            if case .end = Self.unwrapInboundIn(data) {
                state = .upgradeComplete(pendingBytes: [])
                removeDecoder(context: context)
                intercept(contexts, upstream, context: context)
            }
        case var .awaitingConnection(pending):
            // Raw bytes forwarded by the removed decoder: keep them for later.
            state = .awaitingConnection(pendingBytes: [])
            pending.append(data)
            state = .awaitingConnection(pendingBytes: pending)
        case var .upgradeComplete(pending):
            state = .upgradeComplete(pendingBytes: [])
            pending.append(data)
            state = .upgradeComplete(pendingBytes: pending)
        case .upgradeFailed:
            break
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch (state, event as? ChannelEvent) {
        case (.awaitingConnection, .inputClosed?), (.upgradeComplete, .inputClosed?), (.awaitingEnd, .inputClosed?), (.interceptAwaitingEnd, .inputClosed?):
            // Kept for the layer that takes over (glue or TLS).
            inputClosedEarly = true
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        var didRead = false
        while case var .upgradeComplete(pending) = state, !pending.isEmpty {
            state = .upgradeComplete(pendingBytes: [])
            let next = pending.removeFirst()
            state = .upgradeComplete(pendingBytes: pending)
            context.fireChannelRead(next)
            didRead = true
        }
        if didRead { context.fireChannelReadComplete() }
        if inputClosedEarly { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        context.leavePipeline(removalToken: removalToken)
    }

    private func handleConnectHead(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        guard let target = ProxyTarget.parseAuthority(head.uri[...], defaultPort: nil) else {
            logger.notice("rejected a CONNECT with a malformed target", metadata: ["TARGET": "\(head.uri)"])
            state = .upgradeFailed
            ProxyReply.write(.badRequest, "Busymate: CONNECT needs host:port, got \"\(head.uri)\"", close: true, context: context, wrap: Self.wrapOutboundOut)
            return
        }
        self.target = target
        logger[metadataKey: "HOST"] = "\(target.host)"
        logger[metadataKey: "REQUEST_ID"] = "\(RequestID.make())"
        stats.requestStarted()
        switch interception.decide(host: target.host) {
        case let .intercept(contexts, upstream):
            // Upstream is dialled per request, after the client's handshake,
            // so an upstream failure can reach the client as a 502.
            logger.debug("CONNECT, intercepting", metadata: ["TARGET": "\(target)"])
            state = .interceptAwaitingEnd(contexts, upstream)
            return
        case let .passthrough(why):
            logger.debug("CONNECT, passing through", metadata: ["TARGET": "\(target)", "WHY": "\(why)"])
            if capture != nil {
                var record = ExchangeRecord(scheme: "tcp", method: "CONNECT", host: target.host.lowercased(), port: target.port,
                                            path: "", url: target.description, tlsMode: .passthrough)
                record.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
                record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
                record.clientAddress = context.channel.remoteAddress.map(ExchangeCapture.describe)
                tunnelRecord = record
            }
        }
        state = .beganConnecting
        // A passed-through tunnel matches rules as https://host:port/.
        var override: String?
        if !rules.isEmpty, let rule = rules.first(.hostOverride, for: "https://\(target)/"), case let .hostOverride(address) = rule.action {
            override = address
            tunnelRecord?.rule = rule.name
        }

        let channel = context.channel
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let dial = UpstreamDial(target: target, proxy: interception.upstreamProxy(for: target.host))
        ClientBootstrap(group: context.eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.autoRead, value: false)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .connectTimeout(.seconds(10))
            .resolver(dial.resolver(override: override, on: context.eventLoop))
            .connect(host: dial.address.host, port: dial.address.port)
            .flatMap { peer in dial.tunnel(peer).map { peer } }
            .whenComplete { result in
                let (handler, context) = bound.value
                guard channel.isActive else {
                    if case let .success(peer) = result { peer.close(promise: nil) }
                    return
                }
                switch result {
                case let .success(peer): handler.connectSucceeded(peer, context: context)
                case let .failure(error): handler.connectFailed(error, context: context)
                }
            }
    }

    private func connectSucceeded(_ peer: Channel, context: ChannelHandlerContext) {
        switch state {
        case .beganConnecting:
            state = .awaitingEnd(connectResult: peer)
        case let .awaitingConnection(pending):
            state = .upgradeComplete(pendingBytes: pending)
            glue(peer, context: context)
        default:
            peer.close(promise: nil)
            context.close(promise: nil)
        }
    }

    private func connectFailed(_ error: Error, context: ChannelHandlerContext) {
        let failure = ProxyError.connectFailed(host: target?.host ?? "?", port: target?.port ?? 0, underlying: error)
        logger.notice("CONNECT failed", metadata: ["ERROR": "\(failure)"])
        if var record = tunnelRecord {
            record.endedAt = Date()
            record.error = failure.description
            capture?.submit(record)
            tunnelRecord = nil
        }
        state = .upgradeFailed
        ProxyReply.write(failure.status, "Busymate: \(failure)", close: true, context: context, wrap: Self.wrapOutboundOut)
    }

    private func intercept(_ contexts: MITMContexts, _ upstream: UpstreamTLS, context: ChannelHandlerContext) {
        guard let target else { return }
        let serverContext: NIOSSLContext
        do {
            serverContext = try contexts.serverContext(for: target.host)
        } catch {
            let failure = ProxyError.certificate(host: target.host, detail: "\(error)")
            logger.error("cannot intercept", metadata: ["ERROR": "\(failure)"])
            state = .upgradeFailed
            ProxyReply.write(failure.status, "Busymate: \(failure)", close: true, context: context, wrap: Self.wrapOutboundOut)
            return
        }
        writeEstablished(context: context)
        removeHTTPHandlers(context: context)
        do {
            try MITMHandler.install(after: self, in: context.pipeline.syncOperations, target: target, serverContext: serverContext,
                                    upstream: upstream, interception: interception, rules: rules, breakpoints: breakpoints, logger: logger, stats: stats,
                                    capture: capture, timeouts: timeouts)
            // Removal hands the bytes that came early (the ClientHello) to TLS.
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        } catch {
            logger.error("cannot set up interception", metadata: ["ERROR": "\(error)"])
            context.close(promise: nil)
        }
    }

    private func writeEstablished(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Via", value: "1.1 \(LoopGuard.shared.pseudonym)")
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: 200, reasonPhrase: "Connection Established"), headers: headers)
        context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func glue(_ peer: Channel, context: ChannelHandlerContext) {
        writeEstablished(context: context)
        removeHTTPHandlers(context: context)

        let counts = TunnelByteCounts()
        let (localGlue, peerGlue) = counts.gluePair(stats: stats)
        if var opened = tunnelRecord, let capture {
            opened.connectedAt = Date()
            opened.serverAddress = peer.remoteAddress.map(ExchangeCapture.describe)
            tunnelRecord = nil
            let record = opened
            context.channel.closeFuture.and(peer.closeFuture).whenComplete { _ in
                var closed = record
                closed.endedAt = Date()
                closed.bytesUp = counts.up.load(ordering: .relaxed)
                closed.bytesDown = counts.down.load(ordering: .relaxed)
                let hello = counts.hello.withLock { $0 }
                (closed.sni, closed.tlsVersion, closed.tlsCipher) = (hello.sni, hello.version, hello.cipher)
                capture.submit(closed)
            }
        }
        do {
            if capture != nil {
                try context.channel.pipeline.syncOperations.addHandler(TLSHelloSniffer(.client) { hello in counts.hello.withLock { $0.sni = hello.sni } })
                try peer.pipeline.syncOperations.addHandler(TLSHelloSniffer(.server) { hello in
                    counts.hello.withLock { ($0.version, $0.cipher) = (hello.version, hello.cipher) }
                })
            }
            try context.channel.pipeline.syncOperations.addHandler(localGlue)
            try peer.pipeline.syncOperations.addHandler(peerGlue)
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
            // Off until now so that a server that speaks first loses nothing.
            peer.setOption(ChannelOptions.autoRead, value: true).whenFailure { _ in peer.close(promise: nil) }
            logger.debug("CONNECT glued", metadata: ["TARGET": "\(target.map(\.description) ?? "?")"])
        } catch {
            peer.close(mode: .all, promise: nil)
            context.close(promise: nil)
        }
    }

    /// Takes out everything that reads HTTP, the decoder last: it forwards
    /// the bytes it holds beyond the CONNECT head, and they must reach us,
    /// not a handler that expects HTTP parts. The encoder stays for the reply.
    private func removeDecoder(context: ChannelHandlerContext) {
        let ops = context.pipeline.syncOperations
        if let h = try? ops.handler(type: HTTPForwardHandler.self) { ops.removeHandler(h, promise: nil) }
        if let h = try? ops.handler(type: ProtocolErrorResponder.self) { ops.removeHandler(h, promise: nil) }
        if let h = try? ops.handler(type: HTTPServerPipelineHandler.self) { ops.removeHandler(h, promise: nil) }
        if let h = try? ops.handler(type: DrainHandler.self) { ops.removeHandler(h, promise: nil) }
        if let h = try? ops.handler(type: ClientTimeoutHandler.self) { ops.removeHandler(h, promise: nil) }
        if let decoder = try? ops.context(handlerType: ByteToMessageHandler<HTTPRequestDecoder>.self) {
            ops.removeHandler(context: decoder, promise: nil)
        }
        if let h = try? ops.handler(type: RequestLineTap.self) { ops.removeHandler(h, promise: nil) }
    }

    private func removeHTTPHandlers(context: ChannelHandlerContext) {
        let ops = context.pipeline.syncOperations
        if let h = try? ops.handler(type: HTTPResponseEncoder.self) { ops.removeHandler(h, promise: nil) }
    }
}

/// Bytes each way through one passed-through tunnel.
final class TunnelByteCounts: Sendable {
    let up = Atomic<Int>(0)
    let down = Atomic<Int>(0)
    /// What the hellos going past said: the client's SNI, the server's choices.
    let hello = Mutex(TLSHello())

    /// Glue for a client (first) and a server (second) that counts here and in `stats`.
    func gluePair(stats: TrafficStats) -> (GlueHandler, GlueHandler) {
        GlueHandler.matchedPair(
            onBytesFromFirst: { [self] in
                stats.received(fromClient: $0)
                up.add($0, ordering: .relaxed)
            },
            onBytesFromSecond: { [self] in
                stats.sent(toClient: $0)
                down.add($0, ordering: .relaxed)
            })
    }
}
