import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// Carries out `StreamStateMachine` for one client connection (or HTTP/2
/// stream): requests go upstream (`UpstreamSide` dials, reuses and times
/// the server, and reports back as its `UpstreamDelegate`), the proxy's own
/// answers come from `LocalResponse`, held messages from the breakpoints,
/// and every step is reported to the connection's hooks. Reads on either
/// side wait while the other side cannot take more.
final class HTTPExchangeHandler {
    var machine = StreamStateMachine()
    /// Its client's end: set while it carries the exchange.
    var client: (any ExchangeClient)?
    var logger: Logger
    let services: ProxyServices
    let route: ForwardRoute
    /// The connection's layers' owner: CONNECT and `101` go through it.
    let owner: ProxyPipeline
    lazy var upstream = UpstreamSide(delegate: self, services: services, route: route, leg: leg, eventLoop: owner.channel.eventLoop)
    /// The client connection's HTTP/2 layer, when the exchange is one of its streams.
    let leg: HTTP2ClientLeg?

    /// The exchange under way, as the handler needs it beyond the machine.
    struct Current {
        var request: ClientRequest
        /// What goes upstream (after the rules, whose plan is the hooks').
        var upstreamRequest: UpstreamRequest?
        /// A breakpoint holds the request, or the response: read whole first.
        var heldRequest: HeldRequest?
        var heldResponse: HeldResponse?
        /// The request's trailers (chunked HTTP/1, or HTTP/2), forwarded with its end.
        var requestTrailers: HTTPHeaders?
        /// The upstream's `101`: what the connection switches to.
        var switched: HTTPResponseHead?
    }

    var current: Current?
    /// Capture, rules, breakpoints and counters, for the exchange under way.
    var hooks: ExchangeHooks
    /// The SNI the client sent us (intercepted tunnels).
    var clientSNI: String?
    /// A transparent connection's original destination address: every
    /// request on it is dialled there, whatever its Host resolves to.
    var pinnedAddress: String?
    /// An h2c stream's `:scheme` (its `ClientStream` reads it).
    var requestScheme: String?
    var pendingRead = false
    var waitingForCapture = false

    /// `services`: the connection's, or for an HTTP/2 stream its own copy (naming the stream).
    init(owner: ProxyPipeline, route: ForwardRoute, services: ProxyServices? = nil, leg: HTTP2ClientLeg? = nil) {
        self.owner = owner
        self.services = services ?? owner.services
        logger = self.services.logger
        hooks = ExchangeHooks(services: self.services)
        self.route = route
        self.leg = leg
    }

    /// Set by `busymate resend`: the exchange this request repeats. Recorded,
    /// never forwarded.
    static let resentFromHeader = "X-Busymate-Resent-From"

    func destination(of head: HTTPRequestHead) -> (target: ProxyTarget, originForm: String)? { route.destination(of: head) }

    /// The exchange's row goes to the store (with its error, when it
    /// failed): only where the machine says so, and only from here.
    func endRow(_ end: StreamStateMachine.RowEnd?) {
        guard let end else { return }
        hooks.ended(error: end.error)
    }

    /// The machine was driven out of turn: a bug in this handler, not the
    /// peer's doing. Loud in debug builds; in release the connection closes
    /// and the row says why.
    func violation(_ what: String, client: any ExchangeClient) {
        logger.critical("the exchange's state machine was driven out of turn; closing the connection", metadata: ["EVENT": "\(what)"])
        assertionFailure("StreamStateMachine: \(what)")
        releaseHold()
        perform(machine.clientFailed("the proxy closed the connection after an internal error (\(what))"), client: client)
    }
}

/// What the client does, from whichever end carries the exchange (an
/// HTTP/1 connection's pipeline, below, or an HTTP/2 stream).
extension HTTPExchangeHandler {
    func clientSent(_ part: HTTPServerRequestPart, client: any ExchangeClient) {
        switch part {
        case let .head(head):
            requestHead(head, client: client)
        case let .body(buffer):
            requestBody(buffer, client: client)
        case let .end(trailers):
            if let trailers, !trailers.isEmpty {
                current?.requestTrailers = trailers
                hooks.requestTrailers(trailers)
            }
            requestEnd(client: client)
        }
    }

    /// Request body parts are written as they come and flushed per read.
    func clientReadComplete() { upstream.flush() }

    func clientInputClosed(client: any ExchangeClient) {
        // A client that stops sending while its request is held has
        // left (a killed curl's FIN): the request must go nowhere.
        if machine.request == .holding || machine.request == .paused {
            logger.info("the client closed its side while its request was held; dropping the request")
        }
        perform(machine.clientInputClosed(), client: client)
    }

    func clientClosed(client: any ExchangeClient) {
        upstream.cancelTimer()
        releaseHold()
        perform(machine.clientClosed(Self.clientLeft), client: client)
    }

    static let clientLeft = "the client closed the connection before the exchange completed"

    func clientFailed(_ error: Error, client: any ExchangeClient) {
        // A client clock ran out: HTTP1ServerConnection answers and closes;
        // the exchange's row says why, and the server side goes.
        if let expired = error as? ClientClockExpired {
            if expired.answered { hooks.answered(.requestTimeout) }
            perform(machine.clientTimedOut(expired.description), client: client)
            return
        }
        // An HTTP/2 client reset its stream: it has gone, as a closed connection has.
        if let reset = error as? NIOHTTP2Errors.StreamClosed {
            logger.debug("the client reset its stream", metadata: ["CODE": "\(reset.errorCode.name)"])
            releaseHold()
            perform(
                machine.clientFailed("the client reset the stream (\(reset.errorCode.name)) before the exchange completed"), client: client)
            return
        }
        logger.notice("client connection failed", metadata: ["ERROR": "\(error)"])
        // A body that stopped parsing mid-request: HTTP1ServerConnection
        // answered; this exchange's row says so rather than "client closed".
        // (An EOF mid-message is the client leaving: channelInactive says so.)
        if let parse = error as? HTTPParserError, parse != .invalidEOFState, machine.rowOpen {
            let status: HTTPResponseStatus = parse == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
            // As HTTP1ServerConnection, before this handler, sent it: only
            // when no response had begun (it sends nothing then, and the
            // origin's answer already in the row stays as it was).
            let answered = machine.response == .waiting || machine.response == .holding || machine.response == .paused
            if answered {
                hooks.answered(
                    MalformedRequest.answer(status, MalformedRequest.explain(parse), allocator: client.allocator),
                    headRequest: current?.request.head.method == .HEAD)
            }
            releaseHold()
            let why =
                "malformed request: \(MalformedRequest.explain(parse))"
                + (answered ? "; answered \(status.code)" : "; the response had begun, so none was sent")
            perform(machine.clientFailed(why), client: client)
            return
        }
        upstream.close()
        client.close()
    }

    func clientBecameWritable() { upstream.clientBecameWritable() }

    /// The client's end would read more of the request: it may, unless the
    /// store is behind or the upstream side cannot take more yet.
    func clientWantsRead(client: any ExchangeClient) {
        if let capture = services.capture, capture.isBehind {
            // The store is behind: no new requests until it catches up.
            pendingRead = true
            waitForCapture(client)
            return
        }
        if upstream.holdsClientReads {
            // Nothing can be sent yet, or the server cannot take more: hold the client.
            pendingRead = true
            return
        }
        client.read()
    }

    /// Holds reads until the capture writer says the store has caught up
    /// (one wait per connection at most).
    private func waitForCapture(_ client: any ExchangeClient) {
        guard !waitingForCapture, let capture = services.capture else { return }
        waitingForCapture = true
        let bound = NIOLoopBound(self, eventLoop: client.eventLoop)
        capture.whenCaughtUp(on: client.eventLoop) {
            let handler = bound.value
            handler.waitingForCapture = false
            handler.resumeClientReads()
        }
    }

    func resumeClientReads() {
        if pendingRead, let client {
            pendingRead = false
            client.read()
        }
    }
}

/// An HTTP/1 connection's end: the handler in its pipeline.
extension HTTPExchangeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    func handlerAdded(context: ChannelHandlerContext) { client = ContextClient(context, owner: owner) }

    func handlerRemoved(context: ChannelHandlerContext) {
        client = nil
        upstream.close()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let client else { return }
        clientSent(Self.unwrapInboundIn(data), client: client)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        clientReadComplete()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, let client { clientInputClosed(client: client) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let client { clientClosed(client: client) }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // TLS without close_notify: the EOF that follows is the client's half-close.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls {
            owner.noteRaggedTLSEnd()
            return
        }
        guard let client else { return }
        clientFailed(error, client: client)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { clientBecameWritable() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        guard let client else { return }
        clientWantsRead(client: client)
    }
}

extension HTTPExchangeHandler: UpstreamDelegate {
    /// The upstream side's one way in: what the server did, carried out here.
    func upstream(_ event: UpstreamEvent) {
        guard let client else { return }
        switch event {
        case let .connected(server):
            hooks.upstreamConnected(to: server)
        case let .tls(hello, doneAt):
            hooks.upstreamTLS(hello, doneAt: doneAt)
        case let .response(part):
            upstreamResponse(part)
        case .readComplete:
            client.flush()
        case .ready:
            resumeClientReads()
        case let .failed(error):
            fail(error, client: client)
            resumeClientReads()
        case let .closed(target, error):
            upstreamClosed(target, error: error)
        case let .timedOut(error):
            // Only while no answer has begun: a held or streaming one is not the server's to time out.
            guard machine.response == .waiting, !machine.isIdle else { return }
            fail(error, client: client)
        }
    }

    var clientIsWritable: Bool { client?.isWritable ?? false }
    var exchangeIsIdle: Bool { machine.isIdle }
}
