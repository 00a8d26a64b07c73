import BusymateShared
import CaptureStore
import NIOCore
import NIOHTTP1

/// Breakpoints: a held message is read whole, recorded, and sent on (as
/// it was or as edited), answered with an error, or dropped, once
/// `BreakpointController` resolves it. Meanwhile the next request on the
/// connection waits in `HTTP1ServerConnection`, so order is kept.
extension HTTPExchangeHandler {
    // MARK: requests

    /// Adds a part to a held message's body; the message when it has
    /// grown too large to hold (it then goes on unheld).
    private func grow<Held>(_ slot: WritableKeyPath<Current, Held?>, body: WritableKeyPath<Held, ByteBuffer>, by buffer: ByteBuffer)
        -> Held?
    {
        guard var held = current?[keyPath: slot] else { return nil }
        // Not shared while it grows: no copy per part.
        current?[keyPath: slot] = nil
        var part = buffer
        held[keyPath: body].writeBuffer(&part)
        guard held[keyPath: body].readableBytes > BreakpointController.maxHeldBytes else {
            current?[keyPath: slot] = held
            return nil
        }
        return held
    }

    func holdRequestBody(_ buffer: ByteBuffer, client: any ExchangeClient) {
        guard let held = grow(\.heldRequest, body: \.body, by: buffer) else { return }
        logger.notice("a request too large to hold at a breakpoint goes on unheld", metadata: ["BYTES": "\(held.body.readableBytes)"])
        switch machine.heldRequestOverflowed() {
        case .forwardHead:
            forwardHead(client: client)
            hooks.heldRequestBody(held.body)
            upstream.send(.body(.byteBuffer(held.body)))
        case .answer, .illegal:
            violation("a held request's overflow gave no forward", client: client)
        }
    }

    func pauseRequest(client: any ExchangeClient) {
        guard let exchange = current, let held = exchange.heldRequest else { return }
        pause(held.message(exchange.request.head), kind: .request, client: client)
    }

    /// Hands a held message to the breakpoints; their answer comes back on
    /// this loop (at once, as "go on", when capture is off: nobody could
    /// resolve it).
    private func pause(_ message: RawHTTPMessage, bodyless: Bool = false, kind: BreakpointEvent.Kind, client: any ExchangeClient) {
        guard let resolution = hooks.pause(message, bodyless: bodyless, kind: kind, on: client.eventLoop) else {
            resolved(kind, .forward(message, edited: false))
            return
        }
        let bound = NIOLoopBound(self, eventLoop: client.eventLoop)
        resolution.whenSuccess { bound.value.resolved(kind, $0) }
    }

    /// Carries out a resolution, unless nobody is left to take it (the
    /// client left, or the half is no longer paused).
    private func resolved(_ kind: BreakpointEvent.Kind, _ resolution: BreakpointResolution) {
        guard let client else { return }
        switch kind {
        case .request:
            guard machine.request == .paused, let exchange = current, let held = exchange.heldRequest else { return }
            current?.heldRequest = nil
            requestResolved(exchange, held.body, resolution, client: client)
        case .response:
            guard machine.response == .paused, let held = current?.heldResponse else { return }
            current?.heldResponse = nil
            responseResolved(held, resolution, client: client)
        case .messageFromClient, .messageFromServer:
            // WebSocket messages are held by their session, never here.
            return
        }
    }

    private func requestResolved(
        _ exchange: Current, _ heldBody: ByteBuffer, _ resolution: BreakpointResolution, client: any ExchangeClient
    ) {
        switch resolution {
        case .dropped:
            return
        case let .abort(id):
            hooks.heldRequestBody(heldBody)
            let local = LocalResponse.text(.badGateway, "the request was aborted at breakpoint \(id)", allocator: client.allocator)
            answerHeld(local, error: "aborted at breakpoint \(id)", close: false, client: client)
        case let .forward(message, edited):
            var (request, body) = (exchange.request, heldBody)
            if edited {
                guard let editedHead = message.requestHead, let (editedTarget, editedOriginForm) = route.destination(of: editedHead) else {
                    let why = "the edited request has no destination"
                    answerHeld(LocalResponse.text(.badRequest, why, allocator: client.allocator), error: why, close: true, client: client)
                    return
                }
                request = ClientRequest(head: editedHead, target: editedTarget, originForm: editedOriginForm)
                // The client's own HTTP version decides how it is answered.
                request.head.version = exchange.request.head.version
                body = client.allocator.buffer(bytes: message.body)
                hooks.requestEdited(request)
            }
            switch machine.heldRequestReleased() {
            case .forwardHead:
                current?.request = request
                forwardHead(client: client)
                if body.readableBytes > 0 {
                    hooks.heldRequestBody(body)
                    upstream.send(.body(.byteBuffer(body)))
                }
                forwardEnd(client: client)
            case .answer, .illegal:
                violation("a held request's release gave no forward", client: client)
            }
        }
    }

    /// The held request gets the proxy's own answer.
    private func answerHeld(_ local: LocalResponse, error: String, close: Bool, client: any ExchangeClient) {
        switch machine.heldRequestAnswered(close: close) {
        case .answer: respond(local, error: error, client: client)
        case .forwardHead, .illegal: violation("a held request's answer gave no answer", client: client)
        }
    }

    // MARK: responses

    func holdResponseBody(_ buffer: ByteBuffer, client: any ExchangeClient) {
        guard let held = grow(\.heldResponse, body: \.body, by: buffer) else { return }
        logger.notice("a response too large to hold at a breakpoint goes on unheld", metadata: ["BYTES": "\(held.body.readableBytes)"])
        writeReleased(held.head, body: held.body, overflow: true, client: client)
    }

    func pauseResponse(_ held: HeldResponse, client: any ExchangeClient) {
        pause(held.message, bodyless: held.bodyless, kind: .response, client: client)
    }

    private func responseResolved(_ held: HeldResponse, _ resolution: BreakpointResolution, client: any ExchangeClient) {
        switch resolution {
        case .dropped:
            return
        case let .abort(id):
            hooks.responseHeadSent(held.head)
            hooks.responseBodyUnsent(held.body)
            perform(machine.clientFailed("the response was aborted at breakpoint \(id)"), client: client)
        case let .forward(message, edited):
            var (head, body) = (held.head, held.body)
            if edited, let editedHead = message.responseHead {
                (head, body) = (editedHead, client.allocator.buffer(bytes: message.body))
            }
            writeReleased(head, body: body, overflow: false, client: client)
            responseEnded(nil, client: client)
        }
    }

    /// A held response goes to the client: its head and what was read of it.
    private func writeReleased(_ head: HTTPResponseHead, body: ByteBuffer, overflow: Bool, client: any ExchangeClient) {
        let (length, chunked) = (head.headers.contains(name: "content-length"), head.headers.contains(name: "transfer-encoding"))
        let action =
            overflow
            ? machine.heldResponseOverflowed(status: head.status, hasContentLength: length, isChunked: chunked)
            : machine.heldResponseReleased(status: head.status, hasContentLength: length, isChunked: chunked)
        guard case let .writeHead(framing, close) = action else {
            if case let .illegal(what) = action { violation(what, client: client) }
            return
        }
        guard let exchange = current else { return }
        hooks.responseHeadSent(head)
        let clientHead = ResponseFraming.clientHead(
            head, framing: framing, close: close, clientIsHTTP10: exchange.request.head.version == .http1_0)
        client.write(.head(clientHead), promise: nil)
        if body.readableBytes > 0, framing != .bodyless { respondBody(body, client: client) }
    }

    /// The client left: a held message goes nowhere.
    func releaseHold() {
        if machine.isHolding { hooks.clientLeftWhileHeld() }
    }
}
