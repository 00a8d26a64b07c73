import CaptureStore
import Logging
import NIOCore
import NIOWebSocket

/// One WebSocket between a client and its server, after the `101`: every
/// frame one side sends goes on to the other as it came (a client's
/// masking key and a compressed frame's bytes kept), while each side's
/// `WebSocketMessageAssembler` reads it into messages for the observer
/// (the capture). A frame that breaks the protocol ends the socket: both
/// sides get a close frame saying why. Reads wait while the other side
/// cannot take more or the store is behind; a TCP half-close and a close
/// travel across once what was queued has been written. Confined to the
/// connection's event loop (the client's and the server's are the same).
final class WebSocketSession {
    enum State {
        case open
        /// The proxy ended it (a violation): its close frames are going out.
        case ending
        case closed
    }

    var state = State.open
    var client: WebSocketRelay?
    var server: WebSocketRelay?
    private var up: WebSocketMessageAssembler
    private var down: WebSocketMessageAssembler
    let observer: (any WebSocketObserver)?
    private let stats: TrafficStats
    private let logger: Logger
    var closing = WebSocketClosing()
    private var gone = (client: false, server: false)
    /// The last frame written to each side: its end means all before it went.
    private var lastWrite: (client: EventLoopFuture<Void>?, server: EventLoopFuture<Void>?) = (nil, nil)
    private var waitingForStore = false
    let eventLoop: EventLoop
    /// Where `busymate ws send` finds this socket (by `requestID`).
    private let registry: WebSocketRegistry?
    let requestID: String?

    /// A message of the proxy's own, waiting for the message under way in its direction to end.
    private struct Injection {
        var number: Int
        var opcode: WebSocketMessageRecord.Opcode
        var payload: ByteBuffer
        var toClient: Bool
        var promise: EventLoopPromise<Int>
    }

    private var injections: [Injection] = []
    private var injectionCount = 0
    /// How long a message of the proxy's own waits behind one under way (a
    /// peer that never ends its fragmented message) before it is refused.
    static let injectionWait = TimeAmount.seconds(10)
    /// A side that sent its close frame sends no more data: nor may the proxy in its name.
    private var closeSent = (client: false, server: false)

    /// Which messages are held, and where (nil: none; handler tests).
    let breakpoints: (any BreakpointHolds)?
    let url: String
    /// Each direction's message held at a breakpoint, and what came after it.
    var holds: (client: WebSocketHold?, server: WebSocketHold?) = (nil, nil)
    /// Whether each side's sender starts every message with a fresh deflate window.
    let freshWindow: (client: Bool, server: Bool)

    init(
        handshake: WebSocketHandshake, observer: (any WebSocketObserver)?, stats: TrafficStats, logger: Logger, eventLoop: EventLoop,
        registry: WebSocketRegistry? = nil, requestID: String? = nil, breakpoints: (any BreakpointHolds)? = nil, url: String = ""
    ) throws {
        self.eventLoop = eventLoop
        self.breakpoints = breakpoints
        self.url = url
        freshWindow = (handshake.noContextTakeover(client: true), handshake.noContextTakeover(client: false))
        self.registry = registry
        self.requestID = requestID
        up = try WebSocketMessageAssembler(deflate: handshake.deflate)
        down = try WebSocketMessageAssembler(deflate: handshake.deflate)
        self.observer = observer
        self.stats = stats
        self.logger = logger
    }

    /// The two relays to install, the client's first.
    func makeRelays() -> (client: WebSocketRelay, server: WebSocketRelay) {
        let pair = (client: WebSocketRelay(fromClient: true, session: self), server: WebSocketRelay(fromClient: false, session: self))
        (client, server) = (pair.client, pair.server)
        return pair
    }

    /// Both relays are in place: `ws send` may find the socket, and what
    /// came with the `101` (handed on as the HTTP decoders went, with no
    /// read's end after it) is flushed and recorded.
    func switched() {
        // Ended already (a violation in what came with the 101): nothing to register.
        guard case .open = state else { return }
        if let registry, let requestID { registry.register(requestID, self, on: eventLoop) }
        client?.flush()
        server?.flush()
        observer?.readComplete()
    }

    func partner(of fromClient: Bool) -> WebSocketRelay? { fromClient ? server : client }

    // MARK: frames

    func frame(_ received: WebSocketFrame, fromClient: Bool) {
        guard case .open = state else { return }
        let wire = Self.wireSize(received)
        if fromClient {
            closing.bytesUp += wire
            stats.received(fromClient: wire)
        } else {
            closing.bytesDown += wire
            stats.sent(toClient: wire)
        }
        // RFC 6455 §5.1: a client masks every frame, a server none.
        if fromClient != (received.maskKey != nil) {
            violation(.protocolError(fromClient ? "the client sent an unmasked frame" : "the server sent a masked frame"))
            return
        }
        var frame = received
        // Unmasked to be read; the frame writer masks it again with the same key.
        if let key = frame.maskKey { WebSocketMasking.apply(key, to: &frame.data) }
        let step: WebSocketStep
        do {
            step = fromClient ? try up.take(frame) : try down.take(frame)
        } catch {
            violation(error)
            return
        }
        route(frame, step, fromClient: fromClient)
    }

    /// Goes on to the other side, unless a breakpoint holds it (or a message before it).
    func deliver(_ frame: WebSocketFrame, _ step: WebSocketStep, fromClient: Bool) {
        switch step {
        case let .fragment(fragment):
            observer?.fragment(fragment, fromClient: fromClient)
            write(frame, toClient: !fromClient)
            if fragment.last { sendWaitingInjections(fromClient: fromClient) }
        case let .control(opcode, data):
            control(opcode, data, fromClient: fromClient)
            write(frame, toClient: !fromClient)
        }
    }

    private func control(_ opcode: WebSocketOpcode, _ data: ByteBuffer, fromClient: Bool) {
        switch opcode {
        case .ping: closing.pings += 1
        case .pong: closing.pongs += 1
        case .connectionClose:
            if fromClient { closeSent.client = true } else { closeSent.server = true }
            failInjections(fromClient: fromClient, "the \(fromClient ? "client" : "server") closed its side of the socket")
            guard closing.closedBy == nil else { break }
            closing.closedBy = fromClient ? "client" : "server"
            var data = data
            closing.closeCode = data.readInteger(as: UInt16.self).map(Int.init)
            closing.closeReason = data.readString(length: data.readableBytes).flatMap { $0.isEmpty ? nil : $0 }
        default: break
        }
        observer?.control(opcode, fromClient: fromClient)
    }

    func write(_ frame: WebSocketFrame, toClient: Bool) {
        guard let relay = toClient ? client : server, let context = relay.context else { return }
        let promise = context.eventLoop.makePromise(of: Void.self)
        relay.write(frame, promise: promise)
        if toClient { lastWrite.client = promise.futureResult } else { lastWrite.server = promise.futureResult }
    }

    func readComplete(fromClient: Bool) {
        partner(of: fromClient)?.flush()
        observer?.readComplete()
    }

    // MARK: backpressure

    /// A side reads while the other can take more and the store keeps up.
    func mayRead(fromClient: Bool) -> Bool {
        guard partner(of: fromClient)?.isWritable ?? true else { return false }
        // A held message waits for its resolution: that side waits with it.
        guard (fromClient ? holds.client : holds.server)?.complete != true else { return false }
        guard !waitingForStore else { return false }
        guard let observer, observer.isBehind else { return true }
        waitingForStore = true
        let session = NIOLoopBound(self, eventLoop: eventLoop)
        observer.whenCaughtUp {
            session.value.waitingForStore = false
            session.value.client?.resume()
            session.value.server?.resume()
        }
        return false
    }

    /// `fromClient`'s side can take more: the other side may read again.
    func becameWritable(fromClient: Bool) {
        partner(of: fromClient)?.resume()
    }

    // MARK: the end

    /// One side sent its FIN: the other gets it once what was queued for it
    /// has gone (after a message of that side held at a breakpoint, too).
    func inputClosed(fromClient: Bool) {
        if deferEnd(.inputClosed, fromClient: fromClient) { return }
        afterQueuedWrites(toClient: !fromClient) { channel in channel.close(mode: .output, promise: nil) }
    }

    /// One side's connection closed: the other closes once what was queued
    /// for it has gone (a peer that never reads gets `lingerLimit`).
    func sideClosed(fromClient: Bool) {
        if fromClient { gone.client = true } else { gone.server = true }
        if gone.client && gone.server {
            finish()
            return
        }
        if deferEnd(.closed, fromClient: fromClient) { return }
        closePartner(of: fromClient)
    }

    /// The side that sent `fromClient`'s messages is gone: the other closes after what was queued for it.
    func closePartner(of fromClient: Bool) {
        guard let other = partner(of: fromClient)?.context?.channel else { return }
        afterQueuedWrites(toClient: !fromClient) { channel in channel.close(promise: nil) }
        let limit = other.eventLoop.scheduleTask(in: GlueHandler.lingerLimit) { other.close(promise: nil) }
        other.closeFuture.whenComplete { _ in limit.cancel() }
    }

    private func afterQueuedWrites(toClient: Bool, _ body: @escaping @Sendable (Channel) -> Void) {
        guard let channel = (toClient ? client : server)?.context?.channel else { return }
        let last = (toClient ? lastWrite.client : lastWrite.server) ?? channel.eventLoop.makeSucceededVoidFuture()
        (toClient ? client : server)?.flush()
        last.whenComplete { _ in body(channel) }
    }

    func failed(_ error: Error, fromClient: Bool) {
        guard case .open = state else { return }
        if let error = error as? NIOWebSocketError {
            switch error {
            case .invalidFrameLength: violation(.tooBig(WebSocketLimits.frame), frame: true)
            default: violation(.protocolError("\(error)"))
            }
            return
        }
        logger.debug("a WebSocket connection failed", metadata: ["ERROR": "\(error)", "SIDE": "\(fromClient ? "client" : "server")"])
        closing.error = closing.error ?? "the \(fromClient ? "client" : "server") connection failed: \(error)"
        client?.context?.close(promise: nil)
        server?.context?.close(promise: nil)
    }

    /// What a side sent cannot go on: both sides are told why, then closed.
    private func violation(_ violation: WebSocketViolation, frame: Bool = false) {
        guard case .open = state else { return }
        state = .ending
        let text = frame ? "a WebSocket frame is larger than \(WebSocketLimits.frame >> 20) MiB" : violation.description
        logger.notice("ending a WebSocket", metadata: ["WHY": "\(text)"])
        closing.error = text
        if closing.closedBy == nil {
            closing.closedBy = "proxy"
            closing.closeCode = Int(violation.closeCode)
            closing.closeReason = String(text.utf8.prefix(120)) ?? "protocol error"
        }
        for toClient in [true, false] {
            var payload = ByteBuffer()
            payload.writeInteger(violation.closeCode)
            payload.writeString(closing.closeReason ?? "")
            // A client's frames are masked: the proxy speaks as the client to the server.
            let frame = WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: toClient ? nil : .random(), data: payload)
            write(frame, toClient: toClient)
        }
        // Both frames queued first: one side's close closes the other once its frame has gone.
        for toClient in [true, false] {
            afterQueuedWrites(toClient: toClient) { channel in channel.close(promise: nil) }
        }
    }

    private func finish() {
        guard state != .closed else { return }
        state = .closed
        if let registry, let requestID { registry.remove(requestID) }
        if holds.client != nil || holds.server != nil, let requestID { breakpoints?.messageSocketClosed(requestID: requestID) }
        holds = (nil, nil)
        failInjections(fromClient: nil, "the socket closed")
        observer?.closed(closing)
        (client, server) = (nil, nil)
    }

    // MARK: messages of the proxy's own

    /// Sends `payload` as one message (text or binary, uncompressed) to the
    /// client or the server, after the message under way in that direction
    /// ends; completes with its number on the socket.
    func inject(_ opcode: WebSocketMessageRecord.Opcode, _ payload: ByteBuffer, toClient: Bool) -> EventLoopFuture<Int> {
        let promise = eventLoop.makePromise(of: Int.self)
        // To the client is the server's direction, and the other way round.
        let fromClient = !toClient
        guard case .open = state else {
            promise.fail(WebSocketSendRefused(description: "the socket is closing"))
            return promise.futureResult
        }
        guard !(fromClient ? closeSent.client : closeSent.server) else {
            promise.fail(
                WebSocketSendRefused(
                    description: "the \(fromClient ? "client" : "server") closed its side of the socket: nothing more goes that way"))
            return promise.futureResult
        }
        guard !(toClient ? gone.client : gone.server) else {
            promise.fail(WebSocketSendRefused(description: "the \(toClient ? "client" : "server")'s connection is closed"))
            return promise.futureResult
        }
        guard (fromClient ? holds.client : holds.server) == nil else {
            promise.fail(
                WebSocketSendRefused(
                    description: "a message from the \(fromClient ? "client" : "server") is held at a breakpoint: resolve it first"))
            return promise.futureResult
        }
        injectionCount += 1
        let injection = Injection(number: injectionCount, opcode: opcode, payload: payload, toClient: toClient, promise: promise)
        if (fromClient ? up : down).inMessage || injections.contains(where: { $0.toClient == toClient }) {
            injections.append(injection)
            let number = injection.number
            eventLoop.assumeIsolated().scheduleTask(in: Self.injectionWait) { [weak self] in
                guard let self, let index = self.injections.firstIndex(where: { $0.number == number }) else { return }
                let late = self.injections.remove(at: index)
                late.promise.fail(WebSocketSendRefused(description: "a message under way in that direction did not end within 10 s"))
            }
        } else {
            send(injection)
        }
        return promise.futureResult
    }

    private func send(_ injection: Injection) {
        let frame = WebSocketFrame(
            fin: true, opcode: injection.opcode == .text ? .text : .binary, maskKey: injection.toClient ? nil : .random(),
            data: injection.payload)
        if injection.toClient { closing.bytesDown += Self.wireSize(frame) } else { closing.bytesUp += Self.wireSize(frame) }
        guard (injection.toClient ? client : server)?.context != nil else {
            injection.promise.fail(
                WebSocketSendRefused(description: "the \(injection.toClient ? "client" : "server")'s connection is closed"))
            return
        }
        write(frame, toClient: injection.toClient)
        (injection.toClient ? client : server)?.flush()
        let seq = observer?.message(injection.opcode, injection.payload, fromClient: !injection.toClient, origin: .injected) ?? 0
        // Sent once written: a write that fails (the connection went) says so.
        let written = injection.toClient ? lastWrite.client : lastWrite.server
        let promise = injection.promise
        if let written {
            written.whenComplete { result in
                switch result {
                case .success: promise.succeed(seq)
                case let .failure(error): promise.fail(WebSocketSendRefused(description: "the write failed: \(error)"))
                }
            }
        } else {
            promise.succeed(seq)
        }
    }

    /// A message in `fromClient`'s direction ended: what waited behind it goes now.
    func sendWaitingInjections(fromClient: Bool) {
        guard !injections.isEmpty else { return }
        let ready = injections.filter { $0.toClient == !fromClient }
        injections.removeAll { $0.toClient == !fromClient }
        ready.forEach(send)
    }

    /// `fromClient` nil: both directions.
    private func failInjections(fromClient: Bool?, _ why: String) {
        let failing = injections.filter { fromClient == nil || $0.toClient == !(fromClient ?? true) }
        injections.removeAll { fromClient == nil || $0.toClient == !(fromClient ?? true) }
        for injection in failing { injection.promise.fail(WebSocketSendRefused(description: why)) }
    }

    /// A frame's size on the wire: its header (with the shortest length
    /// encoding, as senders use) and its payload.
    static func wireSize(_ frame: WebSocketFrame) -> Int {
        let n = frame.data.readableBytes
        return 2 + (n < 126 ? 0 : n <= 0xFFFF ? 2 : 8) + (frame.maskKey == nil ? 0 : 4) + n
    }
}
