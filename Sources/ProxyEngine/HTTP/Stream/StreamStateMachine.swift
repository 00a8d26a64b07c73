import NIOHTTP1

/// One exchange through the proxy (an HTTP/1 request on its connection, or
/// one HTTP/2 stream), as a value: events in, one action enum per event out,
/// in the manner of NIO's `HTTPServerPipelineHandler` and Hummingbird's
/// connection state machine. The request half (what the client sends) and
/// the response half (what goes back, from the upstream or the proxy itself)
/// move apart; the exchange is over when both have ended. Opening the
/// exchange (its row) and ending its row are actions here: the row ends
/// where an action carries a `RowEnd`, and nowhere else.
///
/// An event that cannot happen in the current state is a bug in the
/// handler, not in the peer: it comes back as `.illegal`, which the handler
/// turns into a loud failure in debug builds and a clean close in release.
/// Events a peer can cause out of turn (a late part, a second close) have
/// their own quiet cases.
struct StreamStateMachine {
    enum RequestHalf: Equatable {
        /// Between exchanges.
        case idle
        /// The head came; the checks, rules and breakpoints decide.
        case deciding
        /// HTTP/2 without a length: the head waits for the first part, which says whether a body follows.
        case awaitingFirstPart
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
        /// An HTTP/2 request whose head gives no length: it goes at its first part or its end.
        case forwardAtFirstPart
        case hold
        /// The proxy answers itself (a block or map_local rule, a refusal);
        /// `close`: the connection closes after (its framing is suspect).
        case answer(close: Bool)
        /// A drop rule: the connection is closed without an answer.
        case hangUp(error: String)
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

    /// The exchange's row is over: it goes to the store, with `error` when it failed.
    struct RowEnd: Equatable {
        var error: String?
    }

    private(set) var request = RequestHalf.idle
    private(set) var response = ResponseHalf.waiting
    private var asked = Request()
    /// The answer under way says `Connection: close`, or must.
    private var closeAfterResponse = false
    /// The client shut its write side: no request will follow.
    private var inputClosed = false
    private var framing = Framing.asIs
    /// An exchange was opened and its row has not ended.
    private(set) var rowOpen = false
    /// Why the answer under way is the proxy's own (its row's error).
    private var answerError: String?

    var isIdle: Bool { request == .idle && response == .waiting }
    var isHolding: Bool { request == .holding || request == .paused || response == .holding || response == .paused }

    /// The row's end, once: later ends of the same exchange carry none.
    mutating func endRow(_ error: String?) -> RowEnd? {
        guard rowOpen else { return nil }
        rowOpen = false
        answerError = nil
        return RowEnd(error: error)
    }

    mutating func reset() {
        request = .idle
        response = .waiting
        framing = .asIs
    }

    /// Says what the handler got wrong; the caller returns it as `.illegal`.
    static func illegal(_ event: String, _ request: RequestHalf, _ response: ResponseHalf) -> String {
        "\(event) in request \(request), response \(response)"
    }

    // MARK: the request half

    mutating func requestHead(_ info: Request) -> HeadAction {
        guard request == .idle else { return .illegal(Self.illegal("a request head", request, response)) }
        asked = info
        response = .waiting
        framing = .asIs
        closeAfterResponse = !info.keepAlive || inputClosed
        request = .deciding
        rowOpen = true
        answerError = nil
        return .openExchange
    }

    mutating func requestDecided(_ verdict: Verdict) -> DecisionAction {
        guard request == .deciding else { return .illegal(Self.illegal("a verdict", request, response)) }
        switch verdict {
        case .forward:
            request = .streaming
            return .forwardHead
        case .forwardAtFirstPart:
            request = .awaitingFirstPart
            return .awaitFirstPart
        case .hold:
            request = .holding
            return .hold
        case let .answer(close):
            request = .discarding
            closeAfterResponse = closeAfterResponse || close
            return .answer
        case let .hangUp(error):
            request = .discarding
            return .hangUp(endRow(error))
        case .connect:
            request = .connecting
            rowOpen = false
            return .awaitConnectEnd
        }
    }

    mutating func requestBody() -> BodyAction {
        switch request {
        case .streaming: return .forward
        case .awaitingFirstPart:
            request = .streaming
            return .forwardHeadThenPart
        case .holding: return .hold
        case .discarding, .connecting: return .drop
        case .idle, .deciding, .paused, .ended: return .illegal(Self.illegal("a request body part", request, response))
        }
    }

    mutating func requestEnd() -> EndAction {
        switch request {
        case .streaming:
            request = .ended
            return .forwardEnd
        case .awaitingFirstPart:
            request = .ended
            return .forwardHeadThenEnd
        case .holding:
            request = .paused
            return .pauseRequest
        case .discarding:
            request = .ended
            if response == .ended { reset() }
            return .drop
        case .connecting:
            request = .idle
            return .routeConnect
        case .idle, .deciding, .paused, .ended:
            return .illegal(Self.illegal("a request end", request, response))
        }
    }

    /// After the request's end went upstream: a 101 that had ended waits for it.
    mutating func requestForwarded() -> ForwardedAction {
        guard request == .ended, response == .switching(ended: true) else { return .wait }
        reset()
        return .switchProtocols
    }

    /// The breakpoint let the held request go (as it was, or edited).
    mutating func heldRequestReleased() -> ReleaseAction {
        guard request == .paused else { return .illegal(Self.illegal("a held request's release", request, response)) }
        request = .ended
        return .forwardHead
    }

    /// The held request gets the proxy's own answer instead (an abort, an edit that leads nowhere).
    mutating func heldRequestAnswered(close: Bool) -> ReleaseAction {
        guard request == .paused else { return .illegal(Self.illegal("a held request's answer", request, response)) }
        request = .ended
        closeAfterResponse = closeAfterResponse || close
        return .answer
    }

    /// A request too large to hold goes on unheld: what was read goes upstream.
    mutating func heldRequestOverflowed() -> ReleaseAction {
        guard request == .holding else { return .illegal(Self.illegal("a held request's overflow", request, response)) }
        request = .streaming
        return .forwardHead
    }

    // MARK: the response half

    /// A response head from the upstream; `hold`: a breakpoint holds it.
    mutating func responseHead(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool, hold: Bool = false)
        -> ResponseHeadAction
    {
        guard response == .waiting, request != .idle, request != .deciding else { return .unexpected }
        if status == .switchingProtocols {
            guard asked.upgrade else { return .unaskedSwitch }
            response = .switching(ended: false)
            return .writeHead(.bodyless, close: false)
        }
        if status.code < 200 { return .writeInformational }
        if hold {
            response = .holding
            return .hold
        }
        let (framing, close) = beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
        return .writeHead(framing, close: close)
    }

    /// The proxy's own answer's head (a rule's, a refusal's, an error's): `error` is its row's.
    mutating func localResponseHead(status: HTTPResponseStatus, error: String?) -> HeldResponseAction {
        guard response == .waiting, request != .idle, request != .deciding else {
            return .illegal(Self.illegal("the proxy's own answer", request, response))
        }
        answerError = error
        let (framing, close) = beginResponse(status: status, hasContentLength: true, isChunked: false)
        return .writeHead(framing, close: close)
    }

    private mutating func beginResponse(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> (Framing, Bool) {
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
        return (framing, closeAfterResponse)
    }

    mutating func responseBody() -> ResponseBodyAction {
        switch response {
        case .streaming: return framing == .bodyless ? .drop : .write
        case .holding: return .hold
        case .switching: return .write
        case .waiting, .paused, .ended: return .unexpected
        }
    }

    mutating func responseEnd() -> ResponseEndAction {
        switch response {
        case .streaming:
            response = .ended
            let releaseUpstream = request == .streaming || request == .awaitingFirstPart
            if releaseUpstream {
                // The server answered before the request ended: the rest is read and dropped.
                request = .discarding
            }
            let done = request == .ended
            if done { reset() }
            return .writeEnd(close: closeAfterResponse, done: done, releaseUpstream: releaseUpstream, endRow(answerError))
        case .holding:
            response = .paused
            return .pauseResponse
        case .switching(ended: false):
            response = .switching(ended: true)
            guard request == .ended else { return .endSwitch(now: false) }
            reset()
            return .endSwitch(now: true)
        case .waiting, .paused, .switching(ended: true), .ended:
            return .unexpected
        }
    }

    /// The breakpoint let the held response go: head, body and end follow.
    mutating func heldResponseReleased(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> HeldResponseAction {
        guard response == .paused else { return .illegal(Self.illegal("a held response's release", request, response)) }
        let (framing, close) = beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
        return .writeHead(framing, close: close)
    }

    /// A response too large to hold goes on unheld.
    mutating func heldResponseOverflowed(status: HTTPResponseStatus, hasContentLength: Bool, isChunked: Bool) -> HeldResponseAction {
        guard response == .holding else { return .illegal(Self.illegal("a held response's overflow", request, response)) }
        let (framing, close) = beginResponse(status: status, hasContentLength: hasContentLength, isChunked: isChunked)
        return .writeHead(framing, close: close)
    }

    // MARK: failures and the client

    /// The upstream failed (could not be reached, reset, timed out, spoke
    /// nonsense) before the exchange was over; `error` is the row's.
    mutating func upstreamFailed(_ error: String) -> UpstreamFailureAction {
        switch response {
        case .waiting, .holding:
            guard request != .idle, request != .deciding else { return .ignore }
            // A request still coming cannot be read past safely, so the connection closes.
            response = .waiting
            let unread = request != .ended && request != .paused
            if unread { request = .discarding }
            closeAfterResponse = closeAfterResponse || unread
            answerError = error
            return .answerError(close: closeAfterResponse)
        case .streaming, .switching:
            abandon()
            return .closeMidResponse(endRow(error))
        case .paused, .ended:
            return .ignore
        }
    }

    /// A client clock ran out mid-exchange (the body stalled): the timeout
    /// handler answered 408 (or, mid-response, closed).
    mutating func clientTimedOut(_ error: String) -> ClientAction {
        let end = endRow(error)
        abandon()
        return .abandon(end)
    }

    /// The client shut its write side. A held request goes nowhere then:
    /// the connection closes and its close ends the row.
    mutating func clientInputClosed() -> ClientAction {
        inputClosed = true
        if isIdle { return .closeFinished }
        if request == .holding || request == .paused { return .close(nil) }
        closeAfterResponse = true
        return .closeAfterResponse
    }

    /// The client's connection closed.
    mutating func clientClosed(_ error: String) -> ClientAction {
        let end = endRow(error)
        abandon()
        return .abandon(end)
    }

    /// The client sent what cannot be parsed or reset its stream; or a
    /// breakpoint aborted the response; or the handler went wrong: close.
    mutating func clientFailed(_ error: String) -> ClientAction {
        let end = endRow(error)
        abandon()
        return .close(end)
    }

    /// Nothing more of this exchange goes anywhere; what the client still sends is dropped.
    private mutating func abandon() {
        let requestEnded = request == .idle || request == .ended || request == .connecting
        reset()
        if !requestEnded { request = .discarding }
    }
}
