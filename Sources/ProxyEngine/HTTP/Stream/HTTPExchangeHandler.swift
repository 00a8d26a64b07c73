import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// Carries out `ExchangeStateMachine` for one client connection: requests
/// go upstream (`UpstreamSide` dials, reuses and times the server), the
/// proxy's own answers come from `LocalResponse`, held messages from the
/// breakpoints, and every step is reported to the capture hook. Reads on
/// either side wait while the other side cannot take more.
final class HTTPExchangeHandler {
    var machine = ExchangeStateMachine()
    var context: ChannelHandlerContext?
    var logger: Logger
    let services: ProxyServices
    let route: ForwardRoute
    /// The connection's layers' owner: CONNECT and `101` go through it.
    let owner: ProxyPipeline
    lazy var upstream = UpstreamSide(exchange: self, services: services, route: route)

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
    }

    var current: Current?
    /// Capture, rules, breakpoints and counters, for the exchange under way.
    var hooks: ExchangeHooks
    /// The SNI the client sent us (intercepted tunnels).
    var clientSNI: String?
    /// A transparent connection's original destination address: every
    /// request on it is dialled there, whatever its Host resolves to.
    var pinnedAddress: String?
    private var pendingRead = false
    /// An HTTP/2 request's head waits for its first body part or its end (see `.forwardHead`).
    private var headAwaitsFirstPart = false
    private var waitingForCapture = false

    init(owner: ProxyPipeline, route: ForwardRoute) {
        self.owner = owner
        services = owner.services
        logger = services.logger
        hooks = ExchangeHooks(services: owner.services)
        self.route = route
    }

    /// Set by `busymate resend`: the exchange this request repeats. Recorded,
    /// never forwarded.
    static let resentFromHeader = "X-Busymate-Resent-From"

    func destination(of head: HTTPRequestHead) -> (target: ProxyTarget, originForm: String)? { route.destination(of: head) }

    /// The exchange's row goes to the store (with `error`, when it failed).
    func submitCapture(error: String? = nil) { hooks.ended(error: error) }
}

extension HTTPExchangeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        upstream.close()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(head):
            requestHead(head, context: context)
        case let .body(buffer):
            switch machine.requestBody() {
            case .forwardBody:
                hooks.requestBody(buffer)
                if headAwaitsFirstPart {
                    // A body after all: chunked, so an HTTP/1.1 origin reads exactly it.
                    headAwaitsFirstPart = false
                    current?.request.head.headers.add(name: "transfer-encoding", value: "chunked")
                    forwardHead(context: context)
                }
                upstream.send(.body(.byteBuffer(buffer)))
            case .holdPart:
                hooks.requestBodyHeld(buffer)
                holdRequestBody(buffer, context: context)
            default:
                break
            }
        case let .end(trailers):
            if headAwaitsFirstPart {
                headAwaitsFirstPart = false
                forwardHead(context: context)
            }
            if let trailers, !trailers.isEmpty {
                current?.requestTrailers = trailers
                hooks.requestTrailers(trailers)
            }
            carryOut(machine.requestEnd(), context: context)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Request body parts are written as they come and flushed per read.
        upstream.flush()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // A client that stops sending while its request is held has
            // left (a killed curl's FIN): the request must go nowhere, so
            // the connection closes and channelInactive drops the hold.
            if machine.request == .holding || machine.request == .paused {
                logger.info("the client closed its side while its request was held; dropping the request")
                context.close(promise: nil)
                context.fireUserInboundEventTriggered(event)
                return
            }
            carryOut(machine.clientInputClosed(), context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        upstream.cancelTimer()
        releaseHold()
        _ = machine.clientClosed()
        submitCapture(error: "the client closed the connection before the exchange completed")
        upstream.close()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A client clock ran out: ClientTimeoutHandler answers and closes;
        // the exchange's row says why, and the server side goes.
        if let expired = error as? ClientTimeoutHandler.Expired {
            if expired.answered { hooks.answered(.requestTimeout) }
            submitCapture(error: expired.description)
            _ = machine.clientTimedOut()
            upstream.close()
            return
        }
        // An HTTP/2 client reset its stream: it has gone, as a closed connection has.
        if let reset = error as? NIOHTTP2Errors.StreamClosed {
            logger.debug("the client reset its stream", metadata: ["CODE": "\(reset.errorCode.name)"])
            releaseHold()
            _ = machine.clientClosed()
            submitCapture(error: "the client reset the stream (\(reset.errorCode.name)) before the exchange completed")
            upstream.close()
            context.close(promise: nil)
            return
        }
        // TLS without close_notify: the EOF that follows is the client's half-close.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls {
            owner.noteRaggedTLSEnd()
            return
        }
        logger.notice("client connection failed", metadata: ["ERROR": "\(error)"])
        // A body that stopped parsing mid-request: ProtocolErrorResponder
        // answered; this exchange's row says so rather than "client closed".
        // (An EOF mid-message is the client leaving: channelInactive says so.)
        if let parse = error as? HTTPParserError, parse != .invalidEOFState, hooks.requestID != nil {
            let status: HTTPResponseStatus = parse == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
            // As ProtocolErrorResponder, before this handler, sent it: only
            // when no response had begun (it sends nothing then, and the
            // origin's answer already in the row stays as it was).
            let answered = machine.response == .waiting || machine.response == .holding || machine.response == .paused
            if answered {
                let allocator = context.channel.allocator
                hooks.answered(ProtocolErrorResponder.answer(status, ProtocolErrorResponder.explain(parse), allocator: allocator),
                               headRequest: current?.request.head.method == .HEAD)
            }
            submitCapture(error: "malformed request: \(ProtocolErrorResponder.explain(parse))" + (answered ? "; answered \(status.code)" : "; the response had begun, so none was sent"))
        }
        upstream.close()
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { upstream.clientBecameWritable() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if let capture = services.capture, capture.isBehind {
            // The store is behind: no new requests until it catches up.
            pendingRead = true
            waitForCapture(context)
            return
        }
        if upstream.holdsClientReads {
            // Nothing can be sent yet, or the server cannot take more: hold the client.
            pendingRead = true
            return
        }
        context.read()
    }

    /// Holds reads until the capture writer says the store has caught up
    /// (one wait per connection at most).
    private func waitForCapture(_ context: ChannelHandlerContext) {
        guard !waitingForCapture, let capture = services.capture else { return }
        waitingForCapture = true
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        capture.whenCaughtUp(on: context.eventLoop) {
            let handler = bound.value
            handler.waitingForCapture = false
            handler.resumeClientReads()
        }
    }

    func resumeClientReads() {
        if pendingRead, let context {
            pendingRead = false
            context.read()
        }
    }

    var clientIsWritable: Bool { context?.channel.isWritable ?? false }
}

// MARK: the request

extension HTTPExchangeHandler {
    private func requestHead(_ received: HTTPRequestHead, context: ChannelHandlerContext) {
        var received = received
        var codecFramed = false
        let info = ExchangeStateMachine.Request(isHead: received.method == .HEAD, keepAlive: received.isKeepAlive,
                                                isHTTP10: received.version == .http1_0, upgrade: HopByHop.upgrade(in: received.headers) != nil)
        if let leg = owner.http2 {
            // NIO's codec adds chunked framing to the HTTP/1 view of a stream: the row leaves it out (no
            // header the client sent), the request keeps it (an HTTP/1.1 origin needs the body framed).
            if received.headers.contains(name: "transfer-encoding") {
                received.headers.remove(name: "transfer-encoding")
                codecFramed = true
            }
            // CONNECT (and RFC 8441's extended CONNECT) inside HTTP/2 is not offered: it is answered, and the stream ends.
            if received.method == .CONNECT {
                answer(.methodNotAllowed, "CONNECT inside HTTP/2 is not supported by this proxy; send CONNECT over HTTP/1.1", verdictClose: true,
                       info: info, context: context)
                return
            }
            // h2c to the explicit proxy: :authority names the host, the request is plain HTTP.
            if leg.priorKnowledge, case .absoluteForm = route, received.uri.hasPrefix("/"), let host = received.headers.first(name: "host") {
                received.uri = "http://\(host)\(received.uri)"
            }
        }
        if case .absoluteForm = route, received.method == .CONNECT {
            guard let target = ProxyTarget.parseAuthority(received.uri[...], defaultPort: nil) else {
                logger.notice("rejected a CONNECT with a malformed target", metadata: ["TARGET": "\(received.uri)"])
                answer(.badRequest, "CONNECT needs host:port, got \"\(received.uri)\"", verdictClose: true, info: info, context: context)
                return
            }
            current = Current(request: ClientRequest(head: received, target: target, originForm: ""))
            _ = machine.requestHead(info, verdict: .connect)
            return
        }
        var head = received
        let resentFrom = head.headers.first(name: Self.resentFromHeader)
        head.headers.remove(name: Self.resentFromHeader)
        guard let (target, originForm) = route.destination(of: head) else {
            logger.notice("rejected a request that is not absolute-form", metadata: ["URI": "\(head.uri)"])
            answer(.badRequest, ForwardRoute.whyNoDestination(head), verdictClose: true, info: info, context: context)
            return
        }
        let origin = ExchangeHooks.Origin(client: context.channel.remoteAddress, clientSNI: clientSNI,
                                          reusedUpstreamHello: upstream.isConnected ? upstream.hello : nil, resentFrom: resentFrom)
        let decision = hooks.requestHead(&head, to: target, originForm, route: route, from: origin, on: context.eventLoop)
        if codecFramed, !head.headers.contains(name: "content-length") { head.headers.add(name: "transfer-encoding", value: "chunked") }
        if owner.tookEncodedTarget(received.uri) {
            hooks.note("raw bytes outside ASCII in the request target were percent-encoded before forwarding (HTTP allows only ASCII there)")
        }
        current = Current(request: ClientRequest(head: head, target: target, originForm: originForm))
        logger[metadataKey: "REQUEST_ID"] = "\(hooks.requestID ?? RequestID.make())"
        logger[metadataKey: "HOST"] = "\(target.host)"
        switch decision {
        case let .refuse(status, why):
            // Its framing is suspect: answered, recorded with why, and closed.
            logger.notice("refused a request", metadata: ["STATUS": "\(status.code)", "WHY": "\(why)"])
            answer(status, why, error: why, verdictClose: true, info: info, context: context)
        case let .block(rule):
            block(by: rule, info: info, context: context)
        case let .mapLocal(rule):
            carryOut(machine.requestHead(info, verdict: .answer(close: false)), context: context, answer: { $0.serveLocal(rule, context: $1) })
        case .hold:
            // The body is read whole before anything goes upstream: say go now.
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                head.headers.remove(name: "expect")
                current?.request.head = head
                context.writeAndFlush(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
            }
            current?.heldRequest = HeldRequest()
            _ = machine.requestHead(info, verdict: .hold)
        case .forward where owner.http2 != nil && !head.headers.contains(name: "content-length") && !head.headers.contains(name: "transfer-encoding"):
            // An HTTP/2 request whose head gives no length (a GET, a DELETE): whether a body follows is known
            // at its first part, in the same read; the head waits for it so its framing can say so.
            if machine.requestHead(info, verdict: .forward) == .forwardHead { headAwaitsFirstPart = true }
        case .forward:
            carryOut(machine.requestHead(info, verdict: .forward), context: context)
        }
    }

    /// A block rule: answer (or hang up) here; nothing goes upstream, and
    /// the rest of the request is read and dropped.
    private func block(by rule: Rule, info: ExchangeStateMachine.Request, context: ChannelHandlerContext) {
        logger.debug("a rule blocked the request", metadata: ["RULE": "\(rule.name)"])
        guard case let .block(code) = rule.action else {
            submitCapture(error: "dropped by the rule \"\(rule.name)\"")
            carryOut(machine.requestHead(info, verdict: .hangUp), context: context)
            return
        }
        answer(HTTPResponseStatus(statusCode: code), "blocked by the rule \"\(rule.name)\"", verdictClose: false, info: info, context: context)
    }

    /// The proxy's own text answer to a request it will not forward; the
    /// row (with `error`, if any) records it as sent and is stored now.
    private func answer(_ status: HTTPResponseStatus, _ text: String, error: String? = nil, verdictClose: Bool, info: ExchangeStateMachine.Request,
                        context: ChannelHandlerContext) {
        let local = LocalResponse.text(status, text, allocator: context.channel.allocator)
        hooks.answered(local, headRequest: info.isHead)
        submitCapture(error: error)
        if current == nil {
            current = Current(request: ClientRequest(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: ""), target: ProxyTarget(host: "", port: 0),
                                                     originForm: ""))
        }
        carryOut(machine.requestHead(info, verdict: .answer(close: verdictClose)), context: context) { handler, context in
            handler.respond(local, context: context)
        }
    }

    /// Sends the request's head upstream (its body follows as it is read).
    func forwardHead(context: ChannelHandlerContext) {
        guard var exchange = current else { return }
        let request = UpstreamRequest(exchange.request, route: route,
                                      plan: hooks.plan, interception: services.interception)
        exchange.upstreamRequest = request
        current = exchange
        logger.debug("forward", metadata: ["METHOD": "\(request.head.method.rawValue)", "TARGET": "\(exchange.request.target)"])
        // A transparent connection goes where its client was going (unless a rule moved it).
        upstream.begin(request, override: hooks.plan.hostOverride ?? (hooks.plan.mapRemote == nil ? pinnedAddress : nil), context: context)
    }

    // MARK: actions

    /// Does what the machine said; `answer` makes the proxy's own answer.
    func carryOut(_ action: ExchangeStateMachine.Action, context: ChannelHandlerContext,
                  answer: ((HTTPExchangeHandler, ChannelHandlerContext) -> Void)? = nil) {
        switch action {
        case .none, .holdPart:
            break
        case .forwardHead:
            forwardHead(context: context)
        case .forwardBody:
            break
        case .forwardEnd:
            upstream.send(.end(current?.requestTrailers))
            carryOut(machine.requestForwarded(), context: context)
        case .pauseRequest:
            pauseRequest(context: context)
        case .answer:
            answer?(self, context)
        case .hangUp:
            if owner.http2 != nil { owner.resetStream() } else { context.close(promise: nil) }
        case .routeConnect:
            guard let exchange = current, exchange.request.head.method == .CONNECT else { return }
            current = nil
            owner.routeConnect(exchange.request.head, target: exchange.request.target, after: self)
        case .answerError, .closeMidResponse, .writeInformational, .writeHead, .writeBody, .writeEnd, .pauseResponse, .protocolError:
            // The response half's actions are carried out where its parts are written.
            break
        case .switchProtocols:
            switchProtocols()
        case let .close(abandoned):
            if abandoned { submitCapture(error: "the client closed the connection before the exchange completed") }
            owner.closeFinishedClient()
        }
    }
}
