import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

/// The first handler of a redirected connection (and of a SOCKS5 one once
/// its handshake is done): holds the client's first bytes until they say
/// what they are (a TLS ClientHello, an HTTP request line, anything else)
/// and asks the owner for that layer, dialling the original destination
/// itself when the bytes are only passed through (SOCKS5 has dialled it
/// already). The layers after it are the explicit proxy's: nothing is
/// written twice.
final class TransparentRouter {
    private enum State {
        /// Reading until the bytes say what they are.
        case peeking
        /// Dialling the original destination (passed through).
        case dialling
        /// Handing over; bytes held are delivered on removal.
        case handingOver
        case closed
    }

    private enum Kind: Equatable { case tls(sni: String?), http, h2c, opaque }

    private var state = State.peeking
    private let owner: ProxyPipeline
    /// Where the client was going (the address, from conntrack; SOCKS5's target).
    private let original: ProxyTarget
    /// The address every dial goes to (nil: the name is resolved).
    private let pinned: String?
    /// SOCKS5's open connection to `original`, until it is glued or dropped.
    private var dialled: (peer: Channel, tunnel: UpstreamDial.Tunnel)?
    /// The host_override rule SOCKS5's dial followed.
    private let rule: String?
    private var logger: Logger
    private var services: ProxyServices { owner.services }
    /// The connection's hooks (its list was made with the connection).
    private let hooks: ExchangeHooks
    private var seen = ByteBuffer()
    private var held: [NIOAny] = []
    private var inputClosed = false
    private var readWithheld = false
    private var context: ChannelHandlerContext?
    private var silence: Scheduled<Void>?
    private var tunnelCapture: TunnelCapture?

    /// A ClientHello larger than this is passed through unread.
    static let peekLimit = 16 * 1024

    init(owner: ProxyPipeline, original: ProxyTarget, pinned: String?, dialled: (Channel, UpstreamDial.Tunnel)? = nil, rule: String? = nil) {
        self.owner = owner
        hooks = ExchangeHooks(services: owner.services)
        self.original = original
        self.pinned = pinned
        self.dialled = dialled.map { (peer: $0.0, tunnel: $0.1) }
        self.rule = rule
        logger = owner.services.logger
        logger[metadataKey: "ORIGINAL_DST"] = "\(original)"
    }

    /// The name for this connection when the bytes name none: the one its
    /// client looked up through the forwarder, else the address.
    private var learnedHost: String {
        guard let client = owner.channel.remoteAddress?.ipAddress else { return original.host }
        return services.dnsNames?.name(for: original.host, client: client) ?? original.host
    }
}

extension TransparentRouter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = NIOAny

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // A client that says nothing (a server-speaks-first protocol) is
        // passed through once the request-head timeout has gone by.
        let seconds = services.timeouts.requestHead
        silence = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
            guard case .peeking = state, let context = self.context else { return }
            decide(.opaque, context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        silence?.cancel()
        dropDialled()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .peeking = state else {
            held.append(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        seen.writeBuffer(&bytes)
        if let kind = classify() { decide(kind, context: context) }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            // No more bytes: decide with what came.
            if case .peeking = state { decide(seen.readableBytes == 0 ? .opaque : (classify() ?? .opaque), context: context) }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        guard case .peeking = state else {
            readWithheld = true
            return
        }
        context.read()
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        silence?.cancel()
        if seen.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(seen))
            seen.clear()
        }
        let later = held
        held = []
        for data in later { context.fireChannelRead(data) }
        context.fireChannelReadComplete()
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        if readWithheld, case .handingOver = state { context.read() }
        context.leavePipeline(removalToken: removalToken)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("transparent connection error", metadata: ["ERROR": "\(error)"])
        context.close(promise: nil)
    }

    // MARK: deciding

    /// What the first bytes are, or nil while they cannot say yet.
    private func classify() -> Kind? {
        guard let first = seen.getInteger(at: seen.readerIndex, as: UInt8.self) else { return nil }
        if first == 0x16 {
            switch TLSHello.parse(seen, expecting: 1) {
            case let .found(hello): return .tls(sni: hello.sni)
            case .incomplete where seen.readableBytes < Self.peekLimit: return nil
            default: return .opaque
            }
        }
        // h2c with prior knowledge opens with its preface (its "PRI" would pass for a method).
        if first == UInt8(ascii: "P"), services.interception.http2 {
            switch H2CPreface.matches(seen) {
            case true?: return .h2c
            case nil: return nil
            case false?: break
            }
        }
        // An HTTP method: upper-case letters, then a space.
        let view = seen.readableBytesView
        for (offset, byte) in view.enumerated() {
            if byte == UInt8(ascii: " ") { return offset > 0 ? .http : .opaque }
            guard (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte), offset < 24 else { return .opaque }
        }
        return nil
    }

    private func decide(_ kind: Kind, context: ChannelHandlerContext) {
        silence?.cancel()
        switch kind {
        case .http, .h2c:
            state = .handingOver
            let target = ProxyTarget(host: learnedHost, port: original.port)
            dropDialled()
            do {
                if kind == .h2c {
                    try owner.transparentH2C(target, pinnedAddress: pinned, replacing: self)
                } else {
                    try owner.transparentHTTP(target, pinnedAddress: pinned, replacing: self)
                }
            } catch {
                logger.error("cannot set up HTTP on a transparent connection", metadata: ["ERROR": "\(error)"])
                close(context)
            }
        case let .tls(sni):
            let target = ProxyTarget(host: sni ?? learnedHost, port: original.port)
            logger[metadataKey: "HOST"] = "\(target.host)"
            switch services.interception.decide(host: target.host) {
            case let .intercept(contexts, upstream):
                intercept(target, contexts, upstream, context: context)
            case let .passthrough(why):
                logger.debug("transparent TLS, passing through", metadata: ["WHY": "\(why)"])
                dial(target, context: context)
            }
        case .opaque:
            dial(ProxyTarget(host: learnedHost, port: original.port), context: context)
        }
    }

    private func intercept(_ target: ProxyTarget, _ contexts: MITMContexts, _ upstream: UpstreamTLS, context: ChannelHandlerContext) {
        let serverContext: NIOSSLContext
        do {
            serverContext = try contexts.serverContext(for: target.host, http2: upstream.http2)
        } catch {
            logger.error("cannot intercept; passing through", metadata: ["ERROR": "\(ProxyError.certificate(host: target.host, detail: "\(error)"))"])
            dial(target, context: context)
            return
        }
        hooks.tunnelIntercepted()
        state = .handingOver
        dropDialled()
        do {
            try owner.intercept(target, serverContext: serverContext, upstream: upstream, pinnedAddress: pinned, replacing: self)
        } catch {
            logger.error("cannot set up interception", metadata: ["ERROR": "\(error)"])
            close(context)
        }
    }

    // MARK: passing through

    /// Glues the client to where it was going; the row names `target`.
    private func dial(_ target: ProxyTarget, context: ChannelHandlerContext) {
        state = .dialling
        let head = HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: target.description)
        tunnelCapture = hooks.tunnelOpened(head, target: target, client: context.channel.remoteAddress)
        if let rule { tunnelCapture?.rule(rule) }
        if let (peer, tunnel) = dialled {
            dialled = nil
            glue(peer, tunnel: tunnel, context: context)
            return
        }
        owner.dialPassThrough(target, override: pinned) { [self] result in
            guard let context = self.context else { return }
            switch result {
            case let .success((peer, tunnel)):
                glue(peer, tunnel: tunnel, context: context)
            case let .failure(error):
                logger.notice("cannot reach the original destination", metadata: ["ERROR": "\(error)"])
                tunnelCapture?.failed(ProxyError.connectFailed(host: original.host, port: original.port, underlying: error).description)
                tunnelCapture = nil
                close(context)
            }
        }
    }

    private func glue(_ peer: Channel, tunnel: UpstreamDial.Tunnel, context: ChannelHandlerContext) {
        state = .handingOver
        do {
            try owner.passThrough(to: peer, tunnel: tunnel, row: tunnelCapture, replacing: self)
        } catch {
            peer.close(mode: .all, promise: nil)
            close(context)
        }
    }

    /// SOCKS5's connection is not wanted: HTTP and interception dial per request.
    private func dropDialled() {
        dialled?.peer.close(promise: nil)
        dialled = nil
    }

    private func close(_ context: ChannelHandlerContext) {
        state = .closed
        context.close(promise: nil)
    }
}
