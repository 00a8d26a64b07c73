import Logging
import NIOCore
import NIOHTTP1

/// A SOCKS5 client's handshake (RFC 1928), in place of the HTTP layer:
/// greeting → method ("no authentication", or 0xFF and close) → request
/// (CONNECT only) → the target dialled → the reply. Success hands the
/// connection, with the open upstream, to the router that peeks at the
/// client's first bytes as a transparent connection's are (TLS, HTTP or
/// anything else), so interception, rules and capture are the same.
/// Dialling before the reply is what lets a failure reach the client as
/// SOCKS5's own code (refused, unreachable). Shaped after
/// swift-nio-examples' connect-proxy: it reads nothing more while it dials.
final class SOCKS5Handshake {
    private enum State: Equatable {
        case greeting
        case request
        case dialling
        case handingOver
        case closed
    }

    private var state = State.greeting
    private let owner: ProxyPipeline
    private var logger: Logger
    private var services: ProxyServices { owner.services }
    /// The connection's hooks (its list was made with the connection).
    private let hooks: ExchangeHooks
    /// What has come of the handshake so far; after it, what came early.
    private var buffer = ByteBuffer()
    private var inputClosed = false
    private var readWithheld = false
    private var context: ChannelHandlerContext?
    private var deadline: Scheduled<Void>?

    init(owner: ProxyPipeline) {
        self.owner = owner
        hooks = ExchangeHooks(services: owner.services)
        logger = owner.services.logger
        logger[metadataKey: "FRONT_END"] = "socks5"
    }
}

extension SOCKS5Handshake: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = NIOAny
    typealias OutboundOut = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The whole handshake within timeouts.request_head_seconds, as a request head.
        let seconds = services.timeouts.requestHead
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(seconds * 1000))) { [self] in
            guard state == .greeting || state == .request, let context = self.context else { return }
            refuse(
                "no SOCKS5 handshake within \(TimeoutWords.format(seconds)) s (timeouts.request_head_seconds)", target: nil,
                reply: nil, context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        advance(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        inputClosed = true
        if state == .greeting || state == .request {
            refuse("the client closed in the middle of the SOCKS5 handshake", target: nil, reply: nil, context: context)
        }
    }

    func read(context: ChannelHandlerContext) {
        // Nothing more is read while the target is dialled (backpressure).
        guard state == .greeting || state == .request else {
            readWithheld = true
            return
        }
        context.read()
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        deadline?.cancel()
        if buffer.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(buffer))
            buffer.clear()
            context.fireChannelReadComplete()
        }
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        if readWithheld, state == .handingOver { context.read() }
        context.leavePipeline(removalToken: removalToken)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("SOCKS5 connection error", metadata: ["ERROR": "\(error)"])
        state = .closed
        context.close(promise: nil)
    }

    // MARK: the handshake

    private func advance(context: ChannelHandlerContext) {
        switch state {
        case .greeting:
            switch SOCKS5Message.greeting(buffer) {
            case .incomplete: return
            case let .invalid(why): refuse(why, target: nil, reply: nil, context: context)
            case let .methods(methods, length):
                buffer.moveReaderIndex(forwardBy: length)
                guard methods.contains(SOCKS5Message.noAuthentication) else {
                    context.writeAndFlush(
                        wrapOutboundOut(ByteBuffer(bytes: [SOCKS5Message.version, SOCKS5Message.noAcceptableMethods])), promise: nil)
                    let offered = methods.map { String(format: "0x%02x", $0) }.joined(separator: ", ")
                    refuse(
                        "the client offers only authentication methods we do not support (\(offered)); Busymate asks none (0x00)",
                        target: nil, reply: nil, context: context)
                    return
                }
                context.writeAndFlush(
                    wrapOutboundOut(ByteBuffer(bytes: [SOCKS5Message.version, SOCKS5Message.noAuthentication])), promise: nil)
                state = .request
                advance(context: context)
            }
        case .request:
            switch SOCKS5Message.request(buffer) {
            case .incomplete: return
            case let .invalid(why, reply): refuse(why, target: nil, reply: reply, context: context)
            case let .connect(target, _, length):
                buffer.moveReaderIndex(forwardBy: length)
                buffer.discardReadBytes()
                dial(target, context: context)
            }
        case .dialling, .handingOver, .closed:
            // Early bytes: kept for the router, in order.
            return
        }
    }

    private func dial(_ target: ProxyTarget, context: ChannelHandlerContext) {
        state = .dialling
        deadline?.cancel()
        logger[metadataKey: "HOST"] = "\(target.host)"
        let override = owner.passThroughOverride(for: target, headers: nil)
        owner.dialPassThrough(target, override: override?.address) { [self] result in
            guard let context = self.context, state == .dialling else {
                if case let .success((peer, _)) = result { peer.close(promise: nil) }
                return
            }
            switch result {
            case let .success((peer, tunnel)):
                context.writeAndFlush(wrapOutboundOut(SOCKS5Message.reply(.succeeded, bound: peer.localAddress)), promise: nil)
                state = .handingOver
                do {
                    try owner.socksEstablished(target, peer: peer, tunnel: tunnel, rule: override?.rule, replacing: self)
                } catch {
                    logger.error("cannot hand over a SOCKS5 connection", metadata: ["ERROR": "\(error)"])
                    peer.close(promise: nil)
                    close(context)
                }
            case let .failure(error):
                let failure = ProxyError.connectFailed(host: target.host, port: target.port, underlying: error)
                logger.notice("SOCKS5 CONNECT failed", metadata: ["ERROR": "\(failure)"])
                let reply = error is UpstreamProxyRefusal ? .generalFailure : SOCKS5Message.reply(for: error)
                refuse("\(failure)", target: target, reply: reply, context: context)
            }
        }
    }

    /// Answers `reply` (when the client got far enough to be answered),
    /// writes the row and closes.
    private func refuse(_ why: String, target: ProxyTarget?, reply: SOCKS5Message.Reply?, context: ChannelHandlerContext) {
        guard state != .closed else { return }
        state = .closed
        let code = reply.map { String(format: "; answered 0x%02x", $0.rawValue) } ?? "; closed"
        logger.notice("SOCKS5 refused", metadata: ["WHY": "\(why)"])
        hooks.socksRefused(target, client: context.channel.remoteAddress, why: "SOCKS5: \(why)\(code)")
        if let reply {
            context.writeAndFlush(wrapOutboundOut(SOCKS5Message.reply(reply, bound: nil)), promise: nil)
        }
        close(context)
    }

    private func close(_ context: ChannelHandlerContext) {
        state = .closed
        context.close(promise: nil)
    }
}
