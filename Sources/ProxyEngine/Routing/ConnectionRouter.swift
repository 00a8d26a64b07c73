import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL

/// The first handler of a connection whose layer is not chosen yet: after
/// a `CONNECT host:port` (in place of the HTTP layer, whose encoder stays
/// for the reply), on a redirected connection, and on a SOCKS5 one once its
/// handshake is done. The `RouteEntry` says where the target comes from.
/// It holds the client's bytes, reading no more than it needs to peek,
/// while the first bytes say what they are (`FirstBytes`); it decides
/// (intercept, plaintext HTTP or h2c, pass through), dials when passing
/// through, answers a CONNECT, and leaves: the owner puts the TLS layer,
/// the HTTP layer or the glue in its place, and the bytes held are handed
/// on in order as it goes. Shaped after swift-nio-examples' connect-proxy.
final class ConnectionRouter {
    enum State {
        /// A CONNECT's router while the HTTP layer leaves: `begin()` decides.
        case idle
        /// Reading until the first bytes say what they are. A CONNECT to be
        /// intercepted has had its 200 and carries its leaf's context.
        case peeking(InterceptTLS?)
        /// Dialling the target to pass the bytes through.
        case dialling
        /// Dialling the origin before the client's TLS handshake (eager ALPN); the ClientHello is held.
        case eagerDialling
        /// Handing over; the bytes held are delivered on removal.
        case handingOver
        /// Refused (a CONNECT has had its error reply) or failed: closing.
        case closed
    }

    /// An intercepting leaf's context, TLS towards the origin, and the
    /// contexts for another ALPN offer (eager ALPN).
    typealias InterceptTLS = (serverContext: NIOSSLContext, upstream: UpstreamTLS, contexts: MITMContexts)

    var state: State
    let owner: ProxyPipeline
    let entry: RouteEntry
    /// Where the client was going: the CONNECT's target, the original destination, SOCKS5's target.
    let original: ProxyTarget
    /// The address every dial goes to (nil: the name is resolved).
    let pinned: String?
    /// SOCKS5's open connection to `original`, until it is glued or dropped.
    var dialled: (peer: Channel, tunnel: UpstreamDial.Tunnel)?
    var logger: Logger
    var services: ProxyServices { owner.services }
    /// The connection's hooks, made once (the list is the connection's).
    let hooks: ExchangeHooks
    /// Everything the client sent since the router came, in order.
    var held = HeldBytes()
    /// What came while peeking, for `FirstBytes`.
    var seen = ByteBuffer()
    var context: ChannelHandlerContext?
    /// A CONNECT's handshake clock, a redirected connection's silence clock.
    var clock: Scheduled<Void>?
    /// A passed-through tunnel is one row: bytes each way and duration.
    var tunnelCapture: TunnelCapture?

    init(owner: ProxyPipeline, entry: RouteEntry) {
        self.owner = owner
        self.entry = entry
        hooks = ExchangeHooks(services: owner.services)
        logger = owner.services.logger
        switch entry {
        case let .connect(_, target):
            (state, original, pinned) = (.idle, target, nil)
            logger[metadataKey: "HOST"] = "\(target.host)"
            logger[metadataKey: "REQUEST_ID"] = "\(RequestID.make())"
        case let .redirected(destination):
            (state, original, pinned) = (.peeking(nil), destination, destination.host)
            logger[metadataKey: "ORIGINAL_DST"] = "\(destination)"
        case let .socks(target, pinned, peer, tunnel, _):
            (state, original, self.pinned) = (.peeking(nil), target, pinned)
            dialled = (peer, tunnel)
            logger[metadataKey: "ORIGINAL_DST"] = "\(target)"
        }
    }

    /// The CONNECT's head, when the target came from one.
    var connectHead: HTTPRequestHead? {
        if case let .connect(head, _) = entry { head } else { nil }
    }

    var isHandingOver: Bool {
        if case .handingOver = state { true } else { false }
    }

    /// The host_override rule SOCKS5's dial followed.
    var socksRule: String? {
        if case let .socks(_, _, _, _, rule) = entry { rule } else { nil }
    }
}

extension ConnectionRouter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = NIOAny
    typealias OutboundOut = HTTPServerResponsePart

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if connectHead == nil { startSilenceClock(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        clock?.cancel()
        dropDialled()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The decoder's left-over bytes and anything after: kept for the next layer.
        held.append(data)
        guard case .peeking = state else { return }
        var bytes = unwrapInboundIn(data)
        seen.writeBuffer(&bytes)
        peek(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard let event = event as? ChannelEvent, event == .inputClosed else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        held.closeInput()
        inputClosedWhilePeeking(context: context)
    }

    func read(context: ChannelHandlerContext) {
        // Nothing is read while the next layer is not there (backpressure), but the first bytes to peek at.
        guard case .peeking = state else {
            held.withholdRead()
            return
        }
        context.read()
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        clock?.cancel()
        held.handOn(context, resumeReading: isHandingOver)
        context.leavePipeline(removalToken: removalToken)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.debug("routed connection error", metadata: ["ERROR": "\(error)"])
        close(context)
    }

    /// Closes the client: nothing was handed over.
    func close(_ context: ChannelHandlerContext) {
        state = .closed
        context.close(promise: nil)
    }

    /// SOCKS5's connection is not wanted: HTTP and interception dial per request.
    func dropDialled() {
        dialled?.peer.close(promise: nil)
        dialled = nil
    }
}
