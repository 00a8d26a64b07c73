import BusymateShared
import NIOCore
import NIOHTTP1
import NIOSSL

/// The response half: the upstream's parts (from `UpstreamSide`) and the
/// proxy's own answers (`LocalResponse`) go to the client the same way,
/// framed and closed as the state machine says.
extension HTTPExchangeHandler {
    func upstreamResponse(_ part: HTTPClientResponsePart) {
        guard let client, var exchange = current else { return }
        switch part {
        case var .head(head):
            let final = head.status.code >= 200 || head.status == .switchingProtocols
            // An answer has begun (a 1xx says the server is there: wait again).
            upstream.stopTimer()
            if !final && machine.request == .ended { upstream.startTimer() }
            // The rules edit a final head; a breakpoint may hold it.
            let hold = head.status.code >= 200 && hooks.responseHead(&head)
            let action = machine.responseHead(
                status: head.status, hasContentLength: head.headers.contains(name: "content-length"),
                isChunked: head.headers.contains(name: "transfer-encoding"), hold: hold)
            switch action {
            case .writeInformational:
                // 100 Continue and friends: passed on, and the real answer follows.
                var headers = head.headers
                HopByHop.strip(&headers)
                client.write(.head(HTTPResponseHead(version: .http1_1, status: head.status, headers: headers)), promise: nil)
                client.flush()
            case let .writeHead(framing, close):
                // Recorded as the client gets it: HTTP/2 carries no chunked framing.
                if leg != nil {
                    var sent = head
                    sent.headers.remove(name: "transfer-encoding")
                    hooks.responseHeadSent(sent)
                } else {
                    hooks.responseHeadSent(head)
                }
                let clientHead = ResponseFraming.clientHead(
                    head, framing: framing, close: close, clientIsHTTP10: exchange.request.head.version == .http1_0,
                    upgrade: exchange.upstreamRequest?.upgrade)
                if head.status == .switchingProtocols { exchange.switched = head }
                client.write(.head(clientHead), promise: nil)
            case .hold:
                exchange.heldResponse = HeldResponse(head: head, isHeadRequest: exchange.request.head.method == .HEAD)
            case .unaskedSwitch:
                fail(.upstreamProtocol("the server switched protocols unasked"), client: client)
                return
            case .unexpected:
                upstreamOutOfTurn("a response head", client: client)
                return
            }
            current = exchange
        case let .body(buffer):
            switch machine.responseBody() {
            case .write: respondBody(buffer, client: client)
            case .hold: holdResponseBody(buffer, client: client)
            case .drop: break
            case .unexpected: upstreamOutOfTurn("a response body part", client: client)
            }
        case let .end(trailers):
            responseEnded(trailers, client: client)
        }
    }

    /// The upstream sent a response part no exchange waits for (a second
    /// answer to one request): its connection is not to be trusted further.
    private func upstreamOutOfTurn(_ what: String, client: any ExchangeClient) {
        logger.notice("the server sent \(what) out of turn; closing its connection")
        upstream.close()
    }

    func respondBody(_ buffer: ByteBuffer, client: any ExchangeClient) {
        hooks.responseBody(buffer)
        client.write(.body(.byteBuffer(buffer)), promise: nil)
    }

    func responseEnded(_ trailers: HTTPHeaders?, client: any ExchangeClient) {
        switch machine.responseEnd() {
        case let .writeEnd(close, done, releaseUpstream, end):
            if let trailers, !trailers.isEmpty { hooks.responseTrailers(trailers) }
            endRow(end)
            // The server answered before the request ended: no request can follow on its connection.
            if releaseUpstream { upstream.close() }
            // Before the end goes out: writing it may hand a pipelined request over at once.
            if done { current = nil }
            if close {
                let written = client.eventLoop.makePromise(of: Void.self)
                client.write(.end(trailers), promise: written)
                client.flush()
                let bound = NIOLoopBound(client, eventLoop: client.eventLoop)
                written.futureResult.whenComplete { _ in bound.value.closeFinished() }
            } else {
                client.write(.end(trailers), promise: nil)
                client.flush()
            }
        case .pauseResponse:
            if let held = current?.heldResponse { pauseResponse(held, client: client) }
        case let .endSwitch(now):
            // The 101's end: the bytes flow once the request has ended too.
            client.write(.end(nil), promise: nil)
            client.flush()
            if now { switchProtocols() }
        case .unexpected:
            upstreamOutOfTurn("a response end", client: client)
        }
    }

    /// The proxy's own answer, head to end, framed like any other and
    /// recorded as sent; `error` is its row's.
    func respond(_ local: LocalResponse, error: String?, client: any ExchangeClient) {
        switch machine.localResponseHead(status: local.head.status, error: error) {
        case let .writeHead(framing, close):
            hooks.answered(local, headRequest: current?.request.head.method == .HEAD)
            let head = ResponseFraming.clientHead(
                local.head, framing: framing, close: close, clientIsHTTP10: current?.request.head.version == .http1_0)
            client.write(.head(head), promise: nil)
            if let body = local.body, machine.responseBody() == .write {
                client.write(.body(.byteBuffer(body)), promise: nil)
            }
            responseEnded(nil, client: client)
        case let .illegal(what):
            violation(what, client: client)
        }
    }

    /// The upstream failed: an error answer if nothing went out yet, else a close.
    func fail(_ error: ProxyError, client: any ExchangeClient) {
        logger.notice("request failed", metadata: ["ERROR": "\(error)"])
        upstream.close()
        switch machine.upstreamFailed(error.description) {
        case .answerError:
            // Nothing went to the client yet: the error answer it gets is the row's response.
            current?.heldResponse = nil
            respond(LocalResponse.text(error.status, "\(error)", allocator: client.allocator), error: error.description, client: client)
        case let .closeMidResponse(end):
            // Part of the response is out already: only a close can say so.
            endRow(end)
            current = nil
            client.close()
        case .ignore:
            break
        }
    }

    /// The upstream connection in use closed.
    func upstreamClosed(_ target: ProxyTarget, error: Error?) {
        // Nothing of this exchange went to that server, or a held response was read whole: it may go.
        guard let client, current?.upstreamRequest != nil, machine.response != .paused, machine.response != .ended else { return }
        if let error = error as? NIOSSLError {
            fail(.upstreamTLS(host: target.host, port: target.port, detail: ProxyError.describeTLS(error)), client: client)
        } else if let error {
            fail(.upstreamFailed(host: target.host, port: target.port, underlying: error), client: client)
        } else {
            fail(.upstreamClosedEarly, client: client)
        }
    }

    /// After a `101` both connections stop speaking HTTP. A WebSocket's
    /// frames are read (`WebSocketSession`): its row is written now and its
    /// messages follow. Anything else is glued, and its row (the handshake)
    /// is written when both have closed, with the bytes that went each way.
    func switchProtocols() {
        guard let client, let (channel, layer) = upstream.detachForSwitch() else { return }
        let exchange = current
        current = nil
        let parsed = exchange?.switched.flatMap { WebSocketHandshake.parse(request: exchange?.request.head.headers ?? [:], response: $0) }
        switch parsed {
        case let .success(handshake)? where hooks.followsWebSockets && machine.endRow(nil) != nil:
            openWebSocket(handshake, upstream: (channel, layer), client: client)
            return
        case let .failure(unreadable)?:
            hooks.note(unreadable.note)
        default:
            break
        }
        let counts = TunnelByteCounts()
        let glue = counts.gluePair(stats: services.stats)
        // The row's end goes with the glue: written once both sides have closed.
        if machine.endRow(nil) != nil { hooks.switched(client: owner.channel, server: channel, counts: counts) }
        logger.debug("switched protocols; passing bytes through")
        do {
            try owner.switchProtocols(upstream: layer, glue: glue)
        } catch {
            logger.error("cannot switch protocols", metadata: ["ERROR": "\(error)"])
            channel.close(promise: nil)
            client.close()
        }
    }

    /// The WebSocket layer in place of HTTP on both connections.
    private func openWebSocket(
        _ handshake: WebSocketHandshake, upstream: (channel: Channel, layer: UpstreamLayer), client: any ExchangeClient
    ) {
        let (requestID, url) = (hooks.flow.requestID, hooks.flow.url)
        let observers = hooks.webSocketOpened(handshake)
        logger.debug("switched protocols to a WebSocket; reading its frames", metadata: ["EXTENSIONS": "\(handshake.extensions ?? "none")"])
        do {
            let session = try WebSocketSession(
                handshake: handshake, observer: observers.first, stats: services.stats, logger: logger,
                eventLoop: owner.channel.eventLoop, registry: services.sockets, requestID: requestID,
                breakpoints: services.breakpoints, url: url)
            try owner.switchToWebSocket(upstream: upstream.layer, relays: session.makeRelays())
        } catch {
            logger.error("cannot switch to the WebSocket layer", metadata: ["ERROR": "\(error)"])
            observers.forEach { $0.closed(WebSocketClosing(closedBy: "proxy", error: "the proxy could not read the WebSocket: \(error)")) }
            upstream.channel.close(promise: nil)
            client.close()
        }
    }
}
