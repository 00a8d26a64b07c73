import NIOHTTP1

/// One client connection's HTTP/1 exchanges through the proxy, as a value:
/// events in, actions out, in the manner of NIO's `HTTPServerPipelineHandler`
/// and Hummingbird's connection state machine. The request half (what the
/// client sends) and the response half (what goes back to it, from the
/// upstream or from the proxy itself) move apart; an exchange is over when
/// both have ended. NIO's pipeline handler in front holds pipelined
/// requests back, so one exchange is under way at a time. `HTTPExchangeHandler`
/// carries the actions out.
struct ExchangeStateMachine {
    enum RequestHalf: Equatable {
        /// Between exchanges.
        case idle
        /// Going upstream as it is read.
        case streaming
        /// Read whole for a breakpoint before anything goes on.
        case holding
        /// Read whole and held: the breakpoint decides.
        case paused
        /// Answered without the upstream, or past its use: read and dropped.
        case discarding
        /// A CONNECT: at its end the router takes the connection.
        case connecting
        /// The end was read.
        case ended
    }

    enum ResponseHalf: Equatable {
        /// Nothing final has gone to the client.
        case waiting
        /// A final head is being read whole for a breakpoint.
        case holding
        /// Read whole and held: the breakpoint decides.
        case paused
        /// The head went out; the body follows.
        case streaming
        /// A `101` went out: bytes flow both ways once both halves have ended.
        case switching(ended: Bool)
        case ended
    }

    /// What the client asked for, as far as answering it goes.
    struct Request: Equatable {
        var isHead = false
        var keepAlive = true
        var isHTTP10 = false
        /// It asked to switch protocols (`Upgrade`).
        var upgrade = false
    }

    /// How a request goes on, as the handler decided (checks, rules, breakpoints).
    enum Verdict: Equatable {
        case forward
        case hold
        /// The proxy answers itself (a block or map_local rule, a refusal);
        /// `close`: the connection closes after (its framing is suspect).
        case answer(close: Bool)
        /// A drop rule: the connection is closed without an answer.
        case hangUp
        case connect
    }

    /// How a response is framed for the client.
    enum Framing: Equatable {
        /// HEAD, 1xx, 204, 304: no body, whatever the headers say.
        case bodyless
        /// The upstream's own Content-Length or chunking stands.
        case asIs
        /// Close-delimited upstream, re-framed as chunked for HTTP/1.1.
        case chunked
        /// Close-delimited for an HTTP/1.0 client: the close ends it.
        case closeDelimited
    }

    enum Action: Equatable {
        case none
        case forwardHead, forwardBody, forwardEnd
        /// Keep the part for the held message.
        case holdPart
        /// The held request has ended: ask the breakpoint.
        case pauseRequest
        /// Make the proxy's own answer (events for its parts follow).
        case answer
        case hangUp
        case routeConnect
        /// A 1xx (not 101) goes to the client; the real answer follows.
        case writeInformational
        /// The response head, framed, and whether it says `Connection: close`.
        case writeHead(Framing, close: Bool)
        case writeBody
        /// The response's end; then `close` the client, and `done`: the
        /// exchange is over (its row goes, the next request may come).
        /// `releaseUpstream`: the server's connection cannot carry another
        /// request (it answered before the request ended).
        case writeEnd(close: Bool, done: Bool, releaseUpstream: Bool)
        /// The held response has ended: ask the breakpoint.
        case pauseResponse
        /// The 101 went out and both halves have ended: glue the bytes.
        case switchProtocols
        /// A failure before any answer went out: answer it with an error
        /// (events for its parts follow), closing after when `close`.
        case answerError(close: Bool)
        /// A failure after part of the answer went out: only a close can say so.
        case closeMidResponse
        /// The client is gone, or will send no more and nothing is under
        /// way: close; `abandoned`: an exchange was under way (its row says so).
        case close(abandoned: Bool)
        /// The upstream said 101 unasked.
        case protocolError
    }

    private(set) var request = RequestHalf.idle
    private(set) var response = ResponseHalf.waiting
    private var asked = Request()
    /// The answer under way says `Connection: close`, or must.
    private var closeAfterResponse = false
    /// The client shut its write side: no request will follow.
    private var inputClosed = false
    private var framing = Framing.asIs

    var isIdle: Bool { request == .idle && response == .waiting }

    // MARK: the request half

    mutating func requestHead(_ info: Request, verdict: Verdict) -> Action {
        guard request == .idle else { return .none }
        asked = info
        response = .waiting
        framing = .asIs
        closeAfterResponse = !info.keepAlive || inputClosed
        switch verdict {
        case .forward:
            request = .streaming
            return .forwardHead
        case .hold:
            request = .holding
            return .none
        case let .answer(close):
            request = .discarding
            closeAfterResponse = closeAfterResponse || close
            return .answer
        case .hangUp:
            request = .discarding
            return .hangUp
        case .connect:
            request = .connecting
            return .none
        }
    }

    mutating func requestBody() -> Action {
        switch request {
        case .streaming: return .forwardBody
        case .holding: return .holdPart
        case .idle, .paused, .discarding, .connecting, .ended: return .none
        }
    }

    mutating func requestEnd() -> Action {
        switch request {
        case .streaming:
            request = .ended
            return .forwardEnd
        case .holding:
            request = .paused
            return .pauseRequest
        case .discarding:
            request = .ended
            return finishIfBothEnded()
        case .connecting:
            request = .idle
            return .routeConnect
        case .idle, .paused, .ended:
            return .none
        }
    }

    /// The breakpoint let the held request go (as it was, or edited): its
    /// head, body and end go upstream now.
    mutating func heldRequestReleased() -> Action {
        guard request == .paused else { return .none }
        request = .ended
        return .forwardHead
    }

    /// The held request gets the proxy's own answer instead (an abort, an
    /// edit that leads nowhere).
    mutating func heldRequestAnswered(close: Bool) -> Action {
        guard request == .paused else { return .none }
        request = .ended
        closeAfterResponse = closeAfterResponse || close
        return .answer
    }

    /// A request too large to hold goes on unheld: what was read goes upstream.
    mutating func heldRequestOverflowed() -> Action {
        guard request == .holding else { return .none }
        request = .streaming
        return .forwardHead
    }

    // MARK: the response half

    /// A response head from the upstream or the proxy; `hold`: a breakpoint
    /// holds the response.
    mutating func responseHead(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool, hold: Bool = false) -> Action {
        guard response == .waiting, request != .idle else { return .none }
        if status == .switchingProtocols {
            guard asked.upgrade else { return .protocolError }
            response = .switching(ended: false)
            return .writeHead(.bodyless, close: false)
        }
        if status.code < 200 { return .writeInformational }
        if hold {
            response = .holding
            return .none
        }
        return beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
    }

    private mutating func beginResponse(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> Action {
        response = .streaming
        if asked.isHead || status == .noContent || status == .notModified {
            framing = .bodyless
        } else if hasContentLength || isChunked {
            framing = .asIs
        } else if asked.isHTTP10 {
            framing = .closeDelimited
            closeAfterResponse = true
        } else {
            framing = .chunked
        }
        return .writeHead(framing, close: closeAfterResponse)
    }

    mutating func responseBody() -> Action {
        switch response {
        case .streaming: return framing == .bodyless ? .none : .writeBody
        case .holding: return .holdPart
        case .switching: return .writeBody
        case .waiting, .paused, .ended: return .none
        }
    }

    mutating func responseEnd() -> Action {
        switch response {
        case .streaming:
            response = .ended
            let releaseUpstream = request == .streaming
            if request == .streaming {
                // The server answered before the request ended: the rest is read and dropped.
                request = .discarding
            }
            let done = request == .ended
            if done { reset() }
            return .writeEnd(close: closeAfterResponse, done: done, releaseUpstream: releaseUpstream)
        case .holding:
            response = .paused
            return .pauseResponse
        case .switching(ended: false):
            response = .switching(ended: true)
            return request == .ended ? switchNow() : .none
        case .waiting, .paused, .switching(ended: true), .ended:
            return .none
        }
    }

    /// The breakpoint let the held response go: head, body and end follow.
    mutating func heldResponseReleased(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> Action {
        guard response == .paused else { return .none }
        return beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
    }

    /// A response too large to hold goes on unheld.
    mutating func heldResponseOverflowed(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> Action {
        guard response == .holding else { return .none }
        return beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
    }

    /// After the request's end went upstream: a 101 that had ended waits for it.
    mutating func requestForwarded() -> Action {
        guard request == .ended, response == .switching(ended: true) else { return .none }
        return switchNow()
    }

    private mutating func switchNow() -> Action {
        reset()
        return .switchProtocols
    }

    // MARK: failures and the connection

    /// The upstream failed (could not be reached, reset, timed out, spoke
    /// nonsense) before the exchange was over.
    mutating func upstreamFailed() -> Action {
        switch response {
        case .waiting, .holding:
            guard request != .idle else { return .none }
            // Nothing went to the client: an error answer. A request still
            // coming cannot be read past safely, so the connection closes.
            response = .waiting
            let unread = request != .ended
            if unread { request = .discarding }
            closeAfterResponse = closeAfterResponse || unread
            return .answerError(close: closeAfterResponse)
        case .streaming, .switching:
            reset()
            return .closeMidResponse
        case .paused, .ended:
            return .none
        }
    }

    /// A client clock ran out mid-exchange (the body stalled): it was
    /// answered 408 (or, mid-response, closed) by the timeout handler.
    mutating func clientTimedOut() -> Action {
        let wasActive = !isIdle
        reset()
        request = .discarding
        return .close(abandoned: wasActive)
    }

    /// The client shut its write side.
    mutating func clientInputClosed() -> Action {
        inputClosed = true
        if isIdle { return .close(abandoned: false) }
        closeAfterResponse = true
        return .none
    }

    /// The client's connection closed (or failed).
    mutating func clientClosed() -> Action {
        let wasActive = !isIdle
        reset()
        return .close(abandoned: wasActive)
    }

    private mutating func finishIfBothEnded() -> Action {
        guard request == .ended, response == .ended else { return .none }
        reset()
        return .none
    }

    private mutating func reset() {
        request = .idle
        response = .waiting
        framing = .asIs
    }
}
