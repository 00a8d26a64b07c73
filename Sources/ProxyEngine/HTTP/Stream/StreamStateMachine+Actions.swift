import NIOHTTP1

/// Each event's actions: one enum per event, so a caller handles every case.
extension StreamStateMachine {
    enum HeadAction: Equatable {
        /// Open the exchange (the hooks start its row) and decide how it goes on.
        case openExchange
        case illegal(String)
    }

    enum DecisionAction: Equatable {
        case forwardHead
        /// Nothing yet: the first part or the end says how the head is framed.
        case awaitFirstPart
        /// Read the request whole for the breakpoint.
        case hold
        /// Make the proxy's own answer (its head, body and end are events that follow).
        case answer
        /// Close without an answer.
        case hangUp(RowEnd?)
        /// Nothing until the CONNECT's end.
        case awaitConnectEnd
        case illegal(String)
    }

    enum BodyAction: Equatable {
        case forward
        /// The head first (framed chunked: a body follows after all), then the part.
        case forwardHeadThenPart
        /// Keep it for the held message.
        case hold
        /// Answered already, or past its use.
        case drop
        case illegal(String)
    }

    enum EndAction: Equatable {
        case forwardEnd
        /// The head first (no body follows), then the end.
        case forwardHeadThenEnd
        /// The held request has ended: ask the breakpoint.
        case pauseRequest
        case routeConnect
        /// Answered already: the exchange may now be over.
        case drop
        case illegal(String)
    }

    enum ForwardedAction: Equatable {
        case wait
        /// The 101 had ended too: glue the bytes.
        case switchProtocols
    }

    enum ReleaseAction: Equatable {
        /// The held (or overflowing) request goes upstream: head, then what was read.
        case forwardHead
        case answer
        case illegal(String)
    }

    enum ResponseHeadAction: Equatable {
        /// A 1xx (not 101) goes to the client; the real answer follows.
        case writeInformational
        /// The head, framed, and whether it says `Connection: close`.
        case writeHead(Framing, close: Bool)
        /// A breakpoint holds the response: read it whole.
        case hold
        /// The upstream said 101 unasked.
        case unaskedSwitch
        /// No exchange waits for a head (the upstream spoke out of turn).
        case unexpected
    }

    enum ResponseBodyAction: Equatable {
        case write
        case hold
        /// A bodyless answer's body (HEAD, 204, 304): never passed on.
        case drop
        case unexpected
    }

    enum ResponseEndAction: Equatable {
        /// The end goes out; then `close` the client. `done`: the exchange is
        /// over (the next request may come). `releaseUpstream`: the server's
        /// connection cannot carry another request (it answered before the
        /// request ended).
        case writeEnd(close: Bool, done: Bool, releaseUpstream: Bool, RowEnd?)
        /// The held response has ended: ask the breakpoint.
        case pauseResponse
        /// The 101's end goes out; the bytes are glued once the request has ended too (`now`).
        case endSwitch(now: Bool)
        case unexpected
    }

    enum HeldResponseAction: Equatable {
        case writeHead(Framing, close: Bool)
        case illegal(String)
    }

    enum UpstreamFailureAction: Equatable {
        /// Nothing went to the client: answer with an error (its parts are
        /// events that follow), closing after when `close`.
        case answerError(close: Bool)
        /// Part of the answer went out: only a close can say so.
        case closeMidResponse(RowEnd?)
        /// Nothing of the exchange depends on the upstream any more (a held
        /// response was read whole, the answer has ended, none is under way).
        case ignore
    }

    enum ClientAction: Equatable {
        /// The connection is going anyway (closed, or another handler closes
        /// it): the row, when one was open, ends and the upstream goes.
        case abandon(RowEnd?)
        /// As `abandon`, and close the client's connection (or stream).
        case close(RowEnd?)
        /// Nothing is under way: close as after a last answer.
        case closeFinished
        /// The answer under way says `Connection: close`, then the connection closes.
        case closeAfterResponse
    }
}
