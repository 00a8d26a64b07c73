import BusymateShared
import CaptureStore
import NIOCore
import NIOHTTP1

/// The request half: a head is opened as an exchange and decided (checks,
/// rules, breakpoints), its parts go upstream, are held, or are dropped, as
/// the machine says.
extension HTTPExchangeHandler {
    func requestHead(_ received: HTTPRequestHead, client: any ExchangeClient) {
        let info = StreamStateMachine.Request(
            isHead: received.method == .HEAD, keepAlive: received.isKeepAlive,
            isHTTP10: received.version == .http1_0, upgrade: HopByHop.upgrade(in: received.headers) != nil)
        switch machine.requestHead(info) {
        case .openExchange:
            decide(received, isHead: info.isHead, client: client)
        case let .illegal(what):
            violation(what, client: client)
        }
    }

    /// What happens to a request: CONNECT, a refusal, or the hooks' decision
    /// (they open its row: the rules edit it, the breakpoints may hold it).
    private func decide(_ received: HTTPRequestHead, isHead: Bool, client: any ExchangeClient) {
        var received = received
        var codecFramed = false
        if let leg {
            // NIO's codec adds chunked framing to the HTTP/1 view of a stream: the row leaves it out (no
            // header the client sent), the request keeps it (an HTTP/1.1 origin needs the body framed).
            if received.headers.contains(name: "transfer-encoding") {
                received.headers.remove(name: "transfer-encoding")
                codecFramed = true
            }
            // CONNECT (and RFC 8441's extended CONNECT) inside HTTP/2 is not offered: it is answered, and the stream ends.
            if received.method == .CONNECT {
                answer(
                    .methodNotAllowed, "CONNECT inside HTTP/2 is not supported by this proxy; send CONNECT over HTTP/1.1", close: true,
                    isHead: isHead, client: client)
                return
            }
            // h2c to the explicit proxy: :authority names the host, the request is plain HTTP.
            if leg.priorKnowledge, case .absoluteForm = route, received.uri.hasPrefix("/"), let host = received.headers.first(name: "host")
            {
                received.uri = "\(requestScheme == "https" ? "https" : "http")://\(host)\(received.uri)"
            }
        }
        if case .absoluteForm = route, received.method == .CONNECT {
            guard let target = ProxyTarget.parseAuthority(received.uri[...], defaultPort: nil) else {
                logger.notice("rejected a CONNECT with a malformed target", metadata: ["TARGET": "\(received.uri)"])
                answer(.badRequest, "CONNECT needs host:port, got \"\(received.uri)\"", close: true, isHead: isHead, client: client)
                return
            }
            current = Current(request: ClientRequest(head: received, target: target, originForm: ""))
            carryOut(machine.requestDecided(.connect), client: client)
            return
        }
        var head = received
        let resentFrom = head.headers.first(name: Self.resentFromHeader)
        head.headers.remove(name: Self.resentFromHeader)
        guard let (target, originForm) = route.destination(of: head) else {
            logger.notice("rejected a request that is not absolute-form", metadata: ["URI": "\(head.uri)"])
            answer(.badRequest, ForwardRoute.whyNoDestination(head), close: true, isHead: isHead, client: client)
            return
        }
        let origin = ExchangeHooks.Origin(
            client: client.remoteAddress, clientSNI: clientSNI,
            reusedUpstreamHello: upstream.isConnected ? upstream.hello : nil, resentFrom: resentFrom)
        let decision = hooks.requestHead(&head, to: target, originForm, route: route, from: origin, on: client.eventLoop)
        if codecFramed, !head.headers.contains(name: "content-length") { head.headers.add(name: "transfer-encoding", value: "chunked") }
        if owner.tookEncodedTarget(received.uri) {
            hooks.note(
                "raw bytes outside ASCII in the request target were percent-encoded before forwarding (HTTP allows only ASCII there)")
        }
        current = Current(request: ClientRequest(head: head, target: target, originForm: originForm))
        logger[metadataKey: "REQUEST_ID"] = "\(hooks.requestID ?? RequestID.make())"
        logger[metadataKey: "HOST"] = "\(target.host)"
        switch decision {
        case let .refuse(status, why):
            // Its framing is suspect: answered, recorded with why, and closed.
            logger.notice("refused a request", metadata: ["STATUS": "\(status.code)", "WHY": "\(why)"])
            answer(status, why, error: why, close: true, isHead: isHead, client: client)
        case let .block(rule):
            logger.debug("a rule blocked the request", metadata: ["RULE": "\(rule.name)"])
            guard case let .block(code) = rule.action else {
                carryOut(machine.requestDecided(.hangUp(error: "dropped by the rule \"\(rule.name)\"")), client: client)
                return
            }
            answer(
                HTTPResponseStatus(statusCode: code), "blocked by the rule \"\(rule.name)\"", close: false, isHead: isHead, client: client)
        case let .mapLocal(rule):
            carryOut(machine.requestDecided(.answer(close: false)), client: client) { $0.serveLocal(rule, client: $1) }
        case .hold:
            // The body is read whole before anything goes upstream: say go now.
            if head.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                head.headers.remove(name: "expect")
                current?.request.head = head
                client.write(.head(HTTPResponseHead(version: .http1_1, status: .continue)), promise: nil)
                client.flush()
            }
            current?.heldRequest = HeldRequest()
            carryOut(machine.requestDecided(.hold), client: client)
        case .forward
        where leg != nil && !head.headers.contains(name: "content-length") && !head.headers.contains(name: "transfer-encoding"):
            // An HTTP/2 request whose head gives no length (a GET, a DELETE): whether a body follows is known
            // at its first part, in the same read; the head waits for it so its framing can say so.
            carryOut(machine.requestDecided(.forwardAtFirstPart), client: client)
        case .forward:
            carryOut(machine.requestDecided(.forward), client: client)
        }
    }

    /// The proxy's own text answer to a request it will not forward; the
    /// row (with `error`, if any) records it as sent.
    private func answer(
        _ status: HTTPResponseStatus, _ text: String, error: String? = nil, close: Bool, isHead: Bool, client: any ExchangeClient
    ) {
        let local = LocalResponse.text(status, text, allocator: client.allocator)
        if current == nil {
            current = Current(
                request: ClientRequest(
                    head: HTTPRequestHead(version: .http1_1, method: isHead ? .HEAD : .GET, uri: ""),
                    target: ProxyTarget(host: "", port: 0), originForm: ""))
        }
        carryOut(machine.requestDecided(.answer(close: close)), client: client) { handler, client in
            handler.respond(local, error: error, client: client)
        }
    }

    func requestBody(_ buffer: ByteBuffer, client: any ExchangeClient) {
        switch machine.requestBody() {
        case .forward:
            hooks.requestBody(buffer)
            upstream.send(.body(.byteBuffer(buffer)))
        case .forwardHeadThenPart:
            // A body after all: chunked, so an HTTP/1.1 origin reads exactly it.
            current?.request.head.headers.add(name: "transfer-encoding", value: "chunked")
            forwardHead(client: client)
            hooks.requestBody(buffer)
            upstream.send(.body(.byteBuffer(buffer)))
        case .hold:
            hooks.requestBodyHeld(buffer)
            holdRequestBody(buffer, client: client)
        case .drop:
            break
        case let .illegal(what):
            violation(what, client: client)
        }
    }

    func requestEnd(client: any ExchangeClient) {
        switch machine.requestEnd() {
        case .forwardEnd:
            forwardEnd(client: client)
        case .forwardHeadThenEnd:
            forwardHead(client: client)
            forwardEnd(client: client)
        case .pauseRequest:
            pauseRequest(client: client)
        case .routeConnect:
            guard let exchange = current, exchange.request.head.method == .CONNECT else { return }
            current = nil
            owner.routeConnect(exchange.request.head, target: exchange.request.target, after: self)
        case .drop:
            break
        case let .illegal(what):
            violation(what, client: client)
        }
    }

    /// The request's end (with its trailers) goes upstream; a 101 that ended first switches now.
    func forwardEnd(client: any ExchangeClient) {
        upstream.send(.end(current?.requestTrailers))
        if machine.requestForwarded() == .switchProtocols { switchProtocols() }
    }

    /// Sends the request's head upstream (its body follows as it is read).
    func forwardHead(client: any ExchangeClient) {
        guard var exchange = current else { return }
        let request = UpstreamRequest(
            exchange.request, route: route,
            plan: hooks.plan, interception: services.interception)
        exchange.upstreamRequest = request
        current = exchange
        logger.debug("forward", metadata: ["METHOD": "\(request.head.method.rawValue)", "TARGET": "\(exchange.request.target)"])
        // A transparent connection goes where its client was going (unless a rule moved it).
        // The connection's first request may take the origin connection dialled before the client's handshake.
        upstream.begin(
            request, override: hooks.plan.hostOverride ?? (hooks.plan.mapRemote == nil ? pinnedAddress : nil),
            eager: owner.takeEagerOrigin())
    }

    // MARK: actions

    /// Does what the machine decided; `answer` makes the proxy's own answer.
    func carryOut(
        _ action: StreamStateMachine.DecisionAction, client: any ExchangeClient,
        answer: ((HTTPExchangeHandler, any ExchangeClient) -> Void)? = nil
    ) {
        switch action {
        case .forwardHead:
            forwardHead(client: client)
        case .awaitFirstPart, .hold, .awaitConnectEnd:
            break
        case .answer:
            answer?(self, client)
        case let .hangUp(end):
            endRow(end)
            client.hangUp()
        case let .illegal(what):
            violation(what, client: client)
        }
    }

    /// The client's side of the machine: close now, or after the answer.
    func perform(_ action: StreamStateMachine.ClientAction, client: any ExchangeClient) {
        switch action {
        case let .abandon(end):
            endRow(end)
            upstream.close()
            current = nil
        case let .close(end):
            endRow(end)
            upstream.close()
            current = nil
            client.close()
        case .closeFinished:
            client.closeFinished()
        case .closeAfterResponse:
            break
        }
    }
}
