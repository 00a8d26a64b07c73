import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOTLS

/// Where a client connection's requests go.
enum ForwardRoute {
    /// The explicit proxy: each request names its host (`GET http://host/`).
    case absoluteForm
    /// A decrypted CONNECT tunnel: origin-form requests to one host, over TLS.
    case intercepted(ProxyTarget, UpstreamTLS)
}

/// Forwards requests upstream and streams the responses back: absolute-form
/// requests from the explicit proxy, or origin-form ones inside an
/// intercepted tunnel (over TLS). One upstream connection per client
/// connection, reused while the host stays the same (as mitmproxy does).
/// Reads on either side wait while the other side cannot take more. Each
/// exchange is captured as it happens.
final class HTTPForwardHandler {
    private enum Upstream {
        case none
        case connecting(ProxyTarget, pending: [HTTPClientRequestPart])
        case connected(ProxyTarget, Channel, UpstreamHandler)
    }

    enum Exchange {
        case idle
        /// A request is on its way; `requestEnded` once its end was read.
        case active(Active)
        /// The proxy answered itself; the rest of the request is dropped.
        case rejected
        /// A breakpoint holds the request: read whole, then resolved.
        case holding(HeldRequest)
        /// A CONNECT: at its end the router takes the connection over.
        case connecting(HTTPRequestHead, ProxyTarget)
    }

    struct Active {
        var requestEnded = false
        var responseStarted = false
        var clientWantsClose: Bool
        var clientIsHTTP10: Bool
        var closeAfterResponse = false
        /// The `Upgrade` the client asked for (a WebSocket), if any.
        var upgrade: String?
        /// The upstream said 101: bytes flow both ways once both heads have ended.
        var switching = false
        /// A headers rule's changes to the response.
        var responseEdits: Rule.HeaderEdits?
        var responseEnded = false
        /// A breakpoint holds the response: read whole, then resolved.
        var heldResponse: HeldResponse?
    }

    private var upstream = Upstream.none
    /// The connected upstream's handlers, for the switch after a `101`.
    private var upstreamLayer: UpstreamLayer?
    var exchange = Exchange.idle
    private var pendingRead = false
    var context: ChannelHandlerContext?
    var logger: Logger
    let stats: TrafficStats
    private let route: ForwardRoute
    private let capture: CaptureWriter?
    private let rules: RuleEngine
    let breakpoints: BreakpointController
    /// For plain requests a map_remote rule sends to https://.
    private let interception: Interception
    /// Whether the upstream connection in use speaks TLS, and goes through
    /// `upstream_proxy` (both part of its reuse key).
    private var upstreamSecure = false
    private var upstreamChained = false
    var exchangeCapture: ExchangeCapture?
    /// The SNI the client sent us (intercepted tunnels).
    var clientSNI: String?
    /// What the upstream server chose, for the connection in use.
    private var upstreamHello: TLSHello?
    private var waitingForCapture = false

    /// `timeouts.upstream_response_seconds`, taken when the connection opened.
    let upstreamResponseTimeout: Double
    /// Runs from a request's end going upstream to its response head: a
    /// deadline moved per request, and one scheduled check that looks again
    /// when it fires (no timer scheduled and cancelled per request).
    var responseTimer: Scheduled<Void>?
    var responseTimerAt: NIODeadline?
    var responseDeadline: NIODeadline?

    /// The connection's layers' owner: CONNECT and `101` go through it.
    private let owner: ProxyPipeline
    private let connector: UpstreamConnector

    init(owner: ProxyPipeline, route: ForwardRoute) {
        let services = owner.services
        self.owner = owner
        connector = services.connector
        upstreamResponseTimeout = services.timeouts.upstreamResponse
        logger = services.logger
        stats = services.stats
        self.route = route
        rules = services.rules
        breakpoints = services.breakpoints
        interception = services.interception
        capture = services.capture
    }

    func submitCapture(error: String? = nil) {
        guard let exchange = exchangeCapture else { return }
        exchangeCapture = nil
        exchange.submit(error: error)
    }
}

extension HTTPForwardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        responseTimer?.cancel()
        responseTimer = nil
        responseTimerAt = nil
        closeUpstream()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(head):
            beginRequest(head, context: context)
        case let .body(buffer):
            stats.received(fromClient: buffer.readableBytes)
            switch exchange {
            case .active: forwardBody(buffer)
            case .holding: holdRequestBody(buffer, context: context)
            case .idle, .rejected, .connecting: break
            }
        case let .end(trailers):
            switch exchange {
            case .active:
                forwardEnd(trailers)
            case var .holding(held):
                held.ended = true
                exchange = .holding(held)
                pauseRequest(held, context: context)
            case .rejected:
                exchange = .idle
            case let .connecting(head, target):
                exchange = .idle
                owner.routeConnect(head, target: target, after: self)
            case .idle:
                break
            }
        }
    }

    func forwardBody(_ buffer: ByteBuffer) {
        exchangeCapture?.requestBodyPart(buffer)
        sendUpstream(.body(.byteBuffer(buffer)))
    }

    func forwardEnd(_ trailers: HTTPHeaders?) {
        guard case var .active(active) = exchange else { return }
        active.requestEnded = true
        exchange = .active(active)
        sendUpstream(.end(trailers))
        if active.switching && active.responseEnded { switchProtocols() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // A pending check would keep this handler alive until it fired.
        responseTimer?.cancel()
        responseTimer = nil
        responseTimerAt = nil
        releaseHold()
        submitCapture(error: "the client closed the connection before the exchange completed")
        closeUpstream()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A client clock ran out: ClientTimeoutHandler answers and closes;
        // the exchange's row says why, and the server side goes.
        if let expired = error as? ClientTimeoutHandler.Expired {
            if expired.answered { exchangeCapture?.answered(.requestTimeout) }
            submitCapture(error: expired.description)
            exchange = .rejected
            closeUpstream()
            return
        }
        // TLS without close_notify: the EOF that follows is the client's half-close.
        if let tls = error as? NIOSSLError, case .uncleanShutdown = tls { return }
        logger.notice("client connection failed", metadata: ["ERROR": "\(error)"])
        // A body that stopped parsing mid-request: ProtocolErrorResponder
        // answered; this exchange's row says so rather than "client closed".
        if let parse = error as? HTTPParserError, parse != .invalidEOFState, exchangeCapture != nil {
            // (An EOF mid-message is the client leaving: channelInactive says so.)
            let status: HTTPResponseStatus = parse == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
            exchangeCapture?.answered(status)
            submitCapture(error: "malformed request: \(ProtocolErrorResponder.explain(parse)); answered \(status.code)")
        }
        closeUpstream()
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, case let .connected(_, _, upstreamHandler) = upstream {
            upstreamHandler.clientBecameWritable()
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if let capture, capture.isBehind {
            // The store is behind: no new requests until it catches up.
            pendingRead = true
            waitForCapture(context)
            return
        }
        switch upstream {
        case .connecting:
            // Nothing can be sent yet: hold the client rather than buffer its body.
            pendingRead = true
        case let .connected(_, channel, _) where !channel.isWritable:
            pendingRead = true
        default:
            context.read()
        }
    }

    // MARK: request side

    /// The request's destination and its origin-form URI, or why it has none.
    func destination(of head: HTTPRequestHead) -> (target: ProxyTarget, originForm: String)? {
        switch route {
        case .absoluteForm:
            guard let parsed = ProxyTarget.parseAbsoluteForm(head.uri) else { return nil }
            // RFC 9112 §3.2.4: OPTIONS to a URL without a path asks about
            // the server itself, and goes on as `OPTIONS *`.
            if head.method == .OPTIONS, let scheme = head.uri.range(of: "://"), !head.uri[scheme.upperBound...].contains("/") {
                return (parsed.target, "*")
            }
            return parsed
        case let .intercepted(target, _):
            if head.uri.hasPrefix("/") {
                // As in absolute-form: a fragment never goes on the wire (RFC 9110 §4.2.4).
                guard let hash = head.uri.utf8.firstIndex(of: UInt8(ascii: "#")) else { return (target, head.uri) }
                return (target, String(head.uri[..<hash]))
            }
            if head.uri == "*" { return (target, head.uri) }
            // Absolute-form inside the tunnel: the tunnel's host still decides.
            guard let schemeEnd = head.uri.range(of: "://") else { return nil }
            let rest = head.uri[schemeEnd.upperBound...]
            let path = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
            return (target, path)
        }
    }

    /// Set by `busymate resend`: the exchange this request repeats. Recorded,
    /// never forwarded.
    static let resentFromHeader = "X-Busymate-Resent-From"

    private func beginRequest(_ received: HTTPRequestHead, context: ChannelHandlerContext) {
        if case .absoluteForm = route, received.method == .CONNECT {
            guard let target = ProxyTarget.parseAuthority(received.uri[...], defaultPort: nil) else {
                exchange = .rejected
                ConnectRouter.refuseMalformed(received, logger: logger, context: context, wrap: Self.wrapOutboundOut)
                return
            }
            exchange = .connecting(received, target)
            return
        }
        var head = received
        let resentFrom = head.headers.first(name: Self.resentFromHeader)
        head.headers.remove(name: Self.resentFromHeader)
        guard let (target, originForm) = destination(of: head) else {
            let why = head.uri.lowercased().hasPrefix("https://")
                ? "https:// URLs go through CONNECT; this proxy does not fetch them in absolute form"
                : "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port"
            logger.notice("rejected a request that is not absolute-form", metadata: ["URI": "\(head.uri)"])
            exchange = .rejected
            ProxyReply.write(.badRequest, "Busymate: \(why)", close: true, context: context, wrap: Self.wrapOutboundOut)
            return
        }
        stats.requestStarted()
        let (scheme, mode): (String, ExchangeRecord.TLSMode) = {
            if case .intercepted = route { return ("https", .mitm) }
            return ("http", .none)
        }()
        // Rules: the request's headers are edited before they are recorded and sent.
        let plan = rules.isEmpty ? RulePlan() : rules.plan(for: ExchangeCapture.url(scheme: scheme, target: target, originForm: originForm))
        plan.requestEdits?.apply(to: &head.headers)
        if let capture {
            exchangeCapture = CaptureHook(writer: capture).exchange(head, target: target, originForm: originForm, scheme: scheme, tlsMode: mode,
                                                                    client: context.channel.remoteAddress, eventLoop: context.eventLoop)
            exchangeCapture?.record.resentFrom = resentFrom
            exchangeCapture?.record.rule = plan.applied.isEmpty ? nil : plan.applied.joined(separator: ", ")
            if case .intercepted = route {
                exchangeCapture?.record.sni = clientSNI
                // A reused connection's TLS is already known.
                if case .connected = upstream { exchangeCapture?.tls(upstreamHello, doneAt: nil) }
            }
        }
        logger[metadataKey: "REQUEST_ID"] = "\(exchangeCapture?.record.requestID ?? RequestID.make())"
        logger[metadataKey: "HOST"] = "\(target.host)"
        if let (status, why) = RequestHeadCheck.problem(head) {
            refuse(status, why, context: context)
            return
        }
        if let rule = plan.block {
            block(by: rule, keepAlive: head.isKeepAlive, context: context)
            return
        }
        if let rule = plan.mapLocal {
            serveLocal(rule, path: originForm, head: head, responseEdits: plan.responseEdits, context: context)
            return
        }
        if !breakpoints.isEmpty, let url = exchangeCapture?.record.url, breakpoints.holds(.request, url) {
            // The body is read whole before anything goes upstream: say go now.
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                head.headers.remove(name: "expect")
                context.writeAndFlush(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
            }
            exchange = .holding(HeldRequest(head: head, target: target, originForm: originForm, plan: plan))
            return
        }
        forward(head, target: target, originForm: originForm, plan: plan, context: context)
    }

    /// Sends the request's head upstream (the body follows as it is read),
    /// dialling when the connection in use goes elsewhere.
    func forward(_ head: HTTPRequestHead, target: ProxyTarget, originForm: String, plan: RulePlan, context: ChannelHandlerContext) {
        logger.debug("forward", metadata: ["METHOD": "\(head.method.rawValue)", "TARGET": "\(target)"])
        var headers = head.headers
        let upgrade = HopByHop.upgrade(in: headers)
        HopByHop.strip(&headers)
        if let upgrade {
            // The one hop-by-hop request the origin must see: it is the origin that switches.
            headers.add(name: "Connection", value: "Upgrade")
            headers.add(name: "Upgrade", value: upgrade)
        }
        // RFC 9112 §3.2.2: an absolute-form URL's authority is the Host,
        // whatever the client's own Host header said.
        if case .absoluteForm = route {
            headers.replaceOrAdd(name: "Host", value: target.port == 80 ? ExchangeCapture.bracketed(target.host) : target.description)
        } else if !headers.contains(name: "host") {
            headers.add(name: "Host", value: target.port == 443 ? ExchangeCapture.bracketed(target.host) : target.description)
        }
        headers.add(name: "Via", value: LoopGuard.shared.via(receivedAs: head.version))
        // map_remote: the row keeps what the client asked for; upstream gets the rule's destination.
        var (destination, path, secure) = (target, originForm, { if case .intercepted = route { true } else { false } }())
        if let rule = plan.mapRemote, case let .mapRemote(to) = rule.action, let mapped = MapRemote(rule: rule, to: to, originForm: originForm) {
            (destination, path, secure) = (mapped.target, mapped.originForm, mapped.secure)
            headers.replaceOrAdd(name: "Host", value: mapped.hostHeader)
        }
        // Plain HTTP through upstream_proxy: absolute-form, with its credentials.
        let chained = interception.upstreamProxy(for: destination.host)
        var uri = path
        if let chained, !secure {
            uri = "http://\(destination.port == 80 ? ExchangeCapture.bracketed(destination.host) : destination.description)\(path)"
            if let authorization = chained.authorization { headers.replaceOrAdd(name: "Proxy-Authorization", value: authorization) }
        }
        let upstreamHead = HTTPRequestHead(version: .http1_1, method: head.method, uri: uri, headers: headers)
        var active = Active(clientWantsClose: !head.isKeepAlive, clientIsHTTP10: head.version.minor == 0 && head.version.major == 1)
        active.upgrade = upgrade
        active.responseEdits = plan.responseEdits
        exchange = .active(active)

        switch upstream {
        case let .connected(current, channel, _) where current == destination && upstreamSecure == secure && upstreamChained == (chained != nil) && channel.isActive:
            sendUpstream(.head(upstreamHead))
        default:
            closeUpstream()
            connect(to: destination, secure: secure, via: chained, first: .head(upstreamHead), override: plan.hostOverride, context: context)
        }
    }

    /// A request that must not go on (RequestHeadCheck): answered here,
    /// recorded with why, and the connection closed (its framing is suspect).
    private func refuse(_ status: HTTPResponseStatus, _ why: String, context: ChannelHandlerContext) {
        exchange = .rejected
        exchangeCapture?.answered(status)
        submitCapture(error: why)
        logger.notice("refused a request", metadata: ["STATUS": "\(status.code)", "WHY": "\(why)"])
        ProxyReply.write(status, "Busymate: \(why)", close: true, context: context, wrap: Self.wrapOutboundOut)
    }

    /// A block rule: answer (or hang up) here; nothing goes upstream, and
    /// the rest of the request is read and dropped.
    private func block(by rule: Rule, keepAlive: Bool, context: ChannelHandlerContext) {
        exchange = .rejected
        exchangeCapture?.record.rule = rule.name
        logger.debug("a rule blocked the request", metadata: ["RULE": "\(rule.name)"])
        switch rule.action {
        case let .block(code):
            let status = HTTPResponseStatus(statusCode: code)
            exchangeCapture?.answered(status)
            submitCapture()
            ProxyReply.write(status, "Busymate: blocked by the rule \"\(rule.name)\"", close: !keepAlive, context: context, wrap: Self.wrapOutboundOut)
        default:
            submitCapture(error: "dropped by the rule \"\(rule.name)\"")
            context.close(promise: nil)
        }
    }

    /// A map_local rule: the file is found and read on NIO's blocking pool,
    /// then answered here; nothing goes upstream. The rest of the request is
    /// read and dropped; the next one waits (the pipeline handler holds it)
    /// until this answer has ended.
    private func serveLocal(_ rule: Rule, path: String, head: HTTPRequestHead, responseEdits: Rule.HeaderEdits?, context: ChannelHandlerContext) {
        guard case let .mapLocal(file, directory) = rule.action else { return }
        exchange = .rejected
        let earlier = exchangeCapture?.record.rule
        exchangeCapture?.record.rule = [earlier, rule.name].compactMap { $0 }.joined(separator: ", ")
        let (keepAlive, isHead) = (head.isKeepAlive, head.method == .HEAD)
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        NIOThreadPool.singleton.runIfActive(eventLoop: context.eventLoop) { () -> Result<(String, Data), MapLocal.Refusal> in
            MapLocal.file(for: rule, file: file, directory: directory, path: path).flatMap { real in MapLocal.read(real).map { (real, $0) } }
        }.whenComplete { result in
            let handler = bound.value
            guard let context = handler.context else {
                handler.submitCapture(error: "the client left before the mapped file was read")
                return
            }
            switch result {
            case let .success(.success((real, data))):
                handler.answerLocally(data, type: MapLocal.contentType(real), keepAlive: keepAlive, isHead: isHead, edits: responseEdits, context: context)
            case let .success(.failure(refusal)):
                handler.submitCapture(error: "map_local rule \"\(rule.name)\": \(refusal)")
                ProxyReply.write(HTTPResponseStatus(statusCode: refusal.status), "Busymate: map_local rule \"\(rule.name)\": \(refusal)", close: !keepAlive,
                                 context: context, wrap: Self.wrapOutboundOut)
            case let .failure(error):
                handler.submitCapture(error: "map_local rule \"\(rule.name)\": \(error)")
                ProxyReply.write(.internalServerError, "Busymate: map_local rule \"\(rule.name)\": \(error)", close: true, context: context, wrap: Self.wrapOutboundOut)
            }
        }
    }

    private func answerLocally(_ data: Data, type: String, keepAlive: Bool, isHead: Bool, edits: Rule.HeaderEdits?, context: ChannelHandlerContext) {
        var headers = HTTPHeaders([("Content-Type", type), ("Content-Length", "\(data.count)"), ("Via", "1.1 busymate")])
        edits?.apply(to: &headers)
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: .ok, headers: headers)
        let body = context.channel.allocator.buffer(bytes: data)
        exchangeCapture?.answered(.ok)
        exchangeCapture?.responseHead(head)
        if !isHead { exchangeCapture?.responseBodyPart(body) }
        submitCapture()
        context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
        if !isHead { context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        let done = context.writeAndFlush(Self.wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// `override`: the address a host_override rule gives the target's name.
    /// `proxy`: `upstream_proxy`, when this dial goes through it (TLS after a
    /// CONNECT; plain requests in absolute-form). It resolves names, so a
    /// host_override does not apply then.
    private func connect(to target: ProxyTarget, secure: Bool, via proxy: UpstreamProxySetting?, first: HTTPClientRequestPart, override: String?,
                         context: ChannelHandlerContext) {
        let tls: NIOSSLContext?
        if secure {
            let upstreamTLS: UpstreamTLS? = { if case let .intercepted(_, upstreamTLS) = route { return upstreamTLS } else { return interception.upstreamTLS } }()
            guard let upstreamTLS else {
                fail(.connectFailed(host: target.host, port: target.port, underlying: ProxyError.NoUpstreamTLS()), context: context)
                return
            }
            tls = upstreamTLS.context(for: target.host).context
        } else {
            tls = nil
        }
        upstream = .connecting(target, pending: [first])
        upstreamSecure = secure
        upstreamChained = proxy != nil
        upstreamHello = nil
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let upstreamHandler = UpstreamHandler(forward: self)
        let boundUpstream = NIOLoopBound(upstreamHandler, eventLoop: context.eventLoop)
        let boundLayer = NIOLoopBound(UpstreamLayer(handler: upstreamHandler), eventLoop: context.eventLoop)
        // SNI carries names only, never IP literals.
        let serverName = IPAddressText.isLiteral(target.host) ? nil : target.host
        let dial = UpstreamDial(target: target, proxy: proxy)
        /// TLS goes first in the pipeline; through a proxy, only once CONNECT is answered.
        @Sendable func addTLS(_ channel: Channel) throws {
            guard let tls else { return }
            let ops = channel.pipeline.syncOperations
            try ops.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName), position: .first)
            try ops.addHandler(TLSHelloSniffer(.server) { hello in boundUpstream.value.serverHello(hello) }, position: .first)
        }
        connector.connect(dial, override: override, autoRead: true, halfClosure: false, on: context.eventLoop) { channel in
            if proxy == nil { try addTLS(channel) }
            try boundLayer.value.install(on: channel)
        }
            .flatMap { channel in
                // Plain requests through a proxy need no tunnel: they go in absolute-form.
                guard proxy != nil, tls != nil else { return channel.eventLoop.makeSucceededFuture(channel) }
                return dial.tunnel(channel).flatMapThrowing { try addTLS(channel); return channel }
            }
            .whenComplete { result in
                bound.value.connectFinished(target, result, layer: boundLayer.value)
            }
    }

    private func connectFinished(_ target: ProxyTarget, _ result: Result<Channel, Error>, layer: UpstreamLayer) {
        guard case let .connecting(current, pending) = upstream, current == target, let context else {
            if case let .success(channel) = result { channel.close(promise: nil) }
            return
        }
        switch result {
        case let .success(channel):
            exchangeCapture?.connected(to: channel.remoteAddress)
            upstream = .connected(target, channel, layer.handler)
            upstreamLayer = layer
            for part in pending { channel.write(part, promise: nil) }
            channel.flush()
            if pending.contains(where: { if case .end = $0 { true } else { false } }) { startResponseTimer() }
            resumeClientReads()
        case let .failure(error):
            upstream = .none
            fail(ProxyError.connectFailed(host: target.host, port: target.port, underlying: error), context: context)
            resumeClientReads()
        }
    }

    private func sendUpstream(_ part: HTTPClientRequestPart) {
        switch upstream {
        case .connecting(let target, var pending):
            upstream = .none
            pending.append(part)
            upstream = .connecting(target, pending: pending)
        case let .connected(_, channel, _):
            if case .end = part {
                channel.writeAndFlush(part, promise: nil)
                startResponseTimer()
            } else {
                channel.write(part, promise: nil)
            }
        case .none:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Request body parts are written as they come and flushed per read.
        if case let .connected(_, channel, _) = upstream { channel.flush() }
        context.fireChannelReadComplete()
    }

    /// The server has this long to begin its answer once the request is in.
    private func startResponseTimer() {
        let due = NIODeadline.now() + .milliseconds(Int64(upstreamResponseTimeout * 1000))
        responseDeadline = due
        if let at = responseTimerAt, at <= due { return }
        scheduleResponseCheck(at: due)
    }

    private func stopResponseTimer() {
        responseDeadline = nil
    }

    private func scheduleResponseCheck(at due: NIODeadline) {
        responseTimer?.cancel()
        guard let context else { return }
        responseTimerAt = due
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        responseTimer = context.eventLoop.scheduleTask(deadline: due) {
            let handler = bound.value
            handler.responseTimer = nil
            handler.responseTimerAt = nil
            guard let due = handler.responseDeadline else { return }
            if NIODeadline.now() < due {
                handler.scheduleResponseCheck(at: due)
                return
            }
            handler.responseDeadline = nil
            guard let context = handler.context, case .active = handler.exchange else { return }
            let target: ProxyTarget? = {
                switch handler.upstream {
                case let .connected(target, _, _), let .connecting(target, _): return target
                case .none: return nil
                }
            }()
            handler.fail(.upstreamTimedOut(host: target?.host ?? "the server", port: target?.port ?? 0, seconds: handler.upstreamResponseTimeout),
                         context: context)
        }
    }

    func closeUpstream() {
        stopResponseTimer()
        if case let .connected(_, channel, handler) = upstream {
            handler.detach()
            channel.close(promise: nil)
        }
        upstream = .none
        upstreamLayer = nil
    }

    func fail(_ error: ProxyError, context: ChannelHandlerContext) {
        guard case let .active(active) = exchange else { return }
        logger.notice("request failed", metadata: ["ERROR": "\(error)"])
        submitCapture(error: error.description)
        closeUpstream()
        if active.responseStarted {
            // Part of the response is out already: only a close can say so.
            context.close(promise: nil)
            exchange = .idle
            return
        }
        exchange = active.requestEnded ? .idle : .rejected
        ProxyReply.write(error.status, "Busymate: \(error)", close: !active.requestEnded || active.clientWantsClose,
                         context: context, wrap: Self.wrapOutboundOut)
    }

    // MARK: response side (called by UpstreamHandler, on the same event loop)

    func upstreamResponse(_ part: HTTPClientResponsePart, isHeadRequest: Bool) {
        guard let context, case var .active(active) = exchange else { return }
        if case let .head(head) = part {
            // An answer has begun (a 1xx says the server is there: wait again).
            stopResponseTimer()
            if head.status.code < 200 && head.status != .switchingProtocols && active.requestEnded { startResponseTimer() }
        }
        switch part {
        case let .head(head) where head.status.code < 200 && head.status != .switchingProtocols:
            // 100 Continue and friends: passed on, and the real answer follows.
            var headers = head.headers
            HopByHop.strip(&headers)
            context.writeAndFlush(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: head.status, headers: headers))), promise: nil)
        case let .head(head) where head.status == .switchingProtocols:
            guard let upgrade = active.upgrade else {
                fail(.upstreamProtocol("the server switched protocols unasked"), context: context)
                return
            }
            active.responseStarted = true
            active.switching = true
            exchange = .active(active)
            exchangeCapture?.responseHead(head)
            var headers = head.headers
            HopByHop.strip(&headers)
            headers.add(name: "Connection", value: "Upgrade")
            headers.add(name: "Upgrade", value: head.headers["upgrade"].first ?? upgrade)
            context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: head.status, headers: headers))), promise: nil)
        case var .head(head):
            // Recorded as the client gets it.
            active.responseEdits?.apply(to: &head.headers)
            if !breakpoints.isEmpty, let url = exchangeCapture?.record.url, breakpoints.holds(.response, url) {
                active.heldResponse = HeldResponse(head: head, isHeadRequest: isHeadRequest)
                exchange = .active(active)
                return
            }
            respondHead(head, isHeadRequest: isHeadRequest, context: context)
        case let .body(buffer):
            if active.heldResponse != nil {
                holdResponseBody(buffer, context: context)
            } else {
                respondBody(buffer, context: context)
            }
        case .end where active.switching:
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
            active.responseEnded = true
            exchange = .active(active)
            if active.requestEnded { switchProtocols() }
        case let .end(trailers):
            if var held = active.heldResponse {
                held.ended = true
                active.heldResponse = held
                exchange = .active(active)
                pauseResponse(held, context: context)
            } else {
                respondEnd(trailers, context: context)
            }
        }
    }

    /// The response's head to the client, framed for it.
    func respondHead(_ head: HTTPResponseHead, isHeadRequest: Bool, context: ChannelHandlerContext) {
        guard case var .active(active) = exchange else { return }
        active.responseStarted = true
        exchangeCapture?.responseHead(head)
        var headers = head.headers
        HopByHop.strip(&headers)
        let bodyless = isHeadRequest || head.status.code < 200 || head.status == .noContent || head.status == .notModified
        if bodyless {
            headers.remove(name: "transfer-encoding")
        } else if headers.contains(name: "transfer-encoding") {
            headers.remove(name: "content-length")
        } else if !headers.contains(name: "content-length") {
            // Close-delimited upstream: re-frame for HTTP/1.1, close for 1.0.
            if active.clientIsHTTP10 {
                active.closeAfterResponse = true
            } else {
                headers.add(name: "Transfer-Encoding", value: "chunked")
            }
        }
        if active.clientWantsClose || active.closeAfterResponse {
            active.closeAfterResponse = true
            headers.replaceOrAdd(name: "Connection", value: "close")
        } else if active.clientIsHTTP10 {
            headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        }
        exchange = .active(active)
        let clientHead = HTTPResponseHead(version: .http1_1, status: head.status, headers: headers)
        context.write(Self.wrapOutboundOut(.head(clientHead)), promise: nil)
    }

    func respondBody(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        stats.sent(toClient: buffer.readableBytes)
        exchangeCapture?.responseBodyPart(buffer)
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
    }

    func respondEnd(_ trailers: HTTPHeaders?, context: ChannelHandlerContext) {
        guard case let .active(active) = exchange else { return }
        exchange = .idle
        submitCapture()
        let done = context.writeAndFlush(Self.wrapOutboundOut(.end(trailers)))
        if active.closeAfterResponse {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
        if !active.requestEnded {
            // The server answered before the request body ended; a new
            // request cannot follow on this upstream connection.
            closeUpstream()
        }
    }

    func upstreamReadComplete() { context?.flush() }

    func upstreamServerHello(_ hello: TLSHello, from handler: UpstreamHandler) {
        switch upstream {
        case let .connected(_, _, current) where current === handler: break
        case .connecting: break
        default: return
        }
        upstreamHello = hello
        exchangeCapture?.tls(hello, doneAt: nil)
    }

    func upstreamHandshakeDone(_ handler: UpstreamHandler) {
        guard case let .connected(_, _, current) = upstream, current === handler else { return }
        exchangeCapture?.tls(upstreamHello, doneAt: Date())
    }

    func upstreamKeepAliveEnded(_ handler: UpstreamHandler) {
        if case let .connected(_, _, current) = upstream, current === handler { closeUpstream() }
    }

    func upstreamClosed(_ handler: UpstreamHandler, error: Error?) {
        guard case let .connected(target, _, current) = upstream, current === handler else { return }
        upstream = .none
        guard let context, case let .active(active) = exchange else { return }
        // A held response was read whole: the server may go.
        if active.heldResponse?.ended == true { return }
        if let error = error as? NIOSSLError {
            fail(.upstreamTLS(host: target.host, port: target.port, detail: ProxyError.describeTLS(error)), context: context)
        } else if let error {
            fail(.upstreamFailed(host: target.host, port: target.port, underlying: error), context: context)
        } else {
            fail(.upstreamClosedEarly, context: context)
        }
    }

    /// Holds reads until the capture writer says the store has caught up
    /// (one wait per connection at most).
    private func waitForCapture(_ context: ChannelHandlerContext) {
        guard !waitingForCapture, let capture else { return }
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

/// The upstream half of `HTTPForwardHandler`: hands response parts over and
/// holds upstream reads while the client cannot take more.
final class UpstreamHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private weak var forward: HTTPForwardHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false
    private var methods: [HTTPMethod] = []
    private var responseKeepAlive = true
    private var failure: Error?

    init(forward: HTTPForwardHandler) { self.forward = forward }

    func detach() { forward = nil }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case let .head(head) = Self.unwrapOutboundIn(data) { methods.append(head.method) }
        context.write(data, promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = Self.unwrapInboundIn(data)
        let isHead = methods.first == .HEAD
        switch part {
        case let .head(head): responseKeepAlive = head.isKeepAlive
        case .end: if !methods.isEmpty { methods.removeFirst() }
        case .body: break
        }
        let forward = self.forward
        // Let go of a connection the server is closing before the end goes
        // out: writing it may hand a pipelined request over at once.
        if case .end = part, !responseKeepAlive { forward?.upstreamKeepAliveEnded(self) }
        forward?.upstreamResponse(part, isHeadRequest: isHead)
    }

    func channelReadComplete(context: ChannelHandlerContext) { forward?.upstreamReadComplete() }

    func channelInactive(context: ChannelHandlerContext) { forward?.upstreamClosed(self, error: failure) }

    func serverHello(_ hello: TLSHello) { forward?.upstreamServerHello(hello, from: self) }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event { forward?.upstreamHandshakeDone(self) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failure = error
        context.close(promise: nil)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { forward?.resumeClientReads() }
    }

    func read(context: ChannelHandlerContext) {
        if forward?.clientIsWritable ?? true {
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

// MARK: protocol switch (WebSocket)

extension HTTPForwardHandler {
    /// After a 101 both connections stop speaking HTTP: the HTTP handlers on
    /// each side go and the bytes are glued, as for a passed-through CONNECT.
    /// The exchange's row (the handshake) is written when both have closed,
    /// with the bytes that went each way.
    private func switchProtocols() {
        guard let context, case let .connected(_, upstreamChannel, upstreamHandler) = upstream, let layer = upstreamLayer else { return }
        upstream = .none
        upstreamLayer = nil
        exchange = .idle
        upstreamHandler.detach()
        let counts = TunnelByteCounts()
        let glue = counts.gluePair(stats: stats)
        if let handshake = exchangeCapture {
            exchangeCapture = nil
            context.channel.closeFuture.and(upstreamChannel.closeFuture).whenComplete { _ in
                var closed = handshake
                closed.record.bytesUp = counts.up.load(ordering: .relaxed)
                closed.record.bytesDown = counts.down.load(ordering: .relaxed)
                closed.submit()
            }
        }
        logger.debug("switched protocols; passing bytes through")
        do {
            try owner.switchProtocols(upstream: layer, glue: glue)
        } catch {
            logger.error("cannot switch protocols", metadata: ["ERROR": "\(error)"])
            upstreamChannel.close(promise: nil)
            context.close(promise: nil)
        }
    }
}
