import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOPosix

/// What becomes of a held WebSocket message.
enum MessageResolution: Sendable, Equatable {
    /// On, as it came (its frames as they were).
    case forward
    /// This payload goes instead, as one uncompressed frame.
    case edited(Data)
    /// Never delivered.
    case drop
    /// Nobody is left to send it to (the socket closed; the tunnel stops).
    case gone
}

/// A WebSocket message held at a breakpoint, by its socket and direction.
struct MessageWaiter: Sendable {
    var id: Int64?
    let kind: BreakpointEvent.Kind
    let text: Bool
    /// False for a compressed message whose sender keeps its deflate window:
    /// the receiver's window needs it as it was, so it can only go on.
    let editable: Bool
    let promise: EventLoopPromise<MessageResolution>
    var cancelled = false
}

/// WebSocket messages at breakpoints (`breakpoints.messages_from_client`,
/// `…_from_server`): held as HTTP messages are, a `breakpoint_events` row
/// each (its payload in `raw_http_initial`), resolved first-come by the
/// CLI, the page or the timeout.
extension BreakpointController {
    static func key(_ requestID: String, _ kind: BreakpointEvent.Kind) -> String { "\(requestID)/\(kind.rawValue)" }

    /// Holds `payload` until it is resolved; completes on `eventLoop`.
    func pauseMessage(
        _ payload: Data, text: Bool, editable: Bool, fromClient: Bool, requestID: String, url: String,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<MessageResolution> {
        let promise = eventLoop.makePromise(of: MessageResolution.self)
        guard let records else {
            promise.succeed(.forward)
            return promise.futureResult
        }
        let kind: BreakpointEvent.Kind = fromClient ? .messageFromClient : .messageFromServer
        let key = Self.key(requestID, kind)
        messageWaiters.withLock { $0[key] = MessageWaiter(kind: kind, text: text, editable: editable, promise: promise) }
        let now = Date()
        let (timeout, expiry) = settings.withLock { ($0.timeoutSeconds, $0.expiry(pausedAt: now)) }
        let event = BreakpointEvent(
            kind: kind, requestID: requestID, method: text ? "TEXT" : "BINARY", url: url, rawHTTPInitial: payload,
            pausedAt: now, expiresAt: expiry, tunnelPID: getpid())
        records.recordBreakpointPause(event, on: eventLoop).whenComplete { result in
            guard case let .success(event) = result, let id = event.id else {
                self.logger.error("cannot record a held WebSocket message; sending it on", metadata: ["REQUEST_ID": "\(requestID)"])
                self.messageWaiters.withLock { $0.removeValue(forKey: key) }?.promise.succeed(.forward)
                return
            }
            let cancelled = self.messageWaiters.withLock { table -> Bool in
                table[key]?.id = id
                return table[key]?.cancelled ?? true
            }
            if cancelled {
                self.messageSocketClosed(requestID: requestID)
                return
            }
            self.logger.info(
                "held a WebSocket message at a breakpoint",
                metadata: ["BREAKPOINT_ID": "\(id)", "REQUEST_ID": "\(requestID)", "URL": "\(url)"])
            self.notifier?.post(.breakpointPaused, payload: "\(id)")
            guard timeout > 0 else { return }
            eventLoop.scheduleTask(in: .milliseconds(Int64(timeout * 1000))) { self.timedOut(id: id) }
        }
        return promise.futureResult
    }

    /// Carries out what was asked of a held message, if `event` is one of
    /// this tunnel's. Blocking (the store): off the event loops.
    func carryOutMessage(_ event: BreakpointRepository.Pending, repository: BreakpointRepository) -> Bool {
        let id = event.id
        // Looked at, not taken: a change refused leaves it where it is, for the socket's close to find.
        guard let waiter = messageWaiters.withLock({ table in table.values.first { $0.id == id } }) else { return false }
        let resolution: MessageResolution
        let outcome: BreakpointEvent.Outcome
        switch event.requested {
        case .continue, .timeout:
            (resolution, outcome) = (.forward, event.requested == .timeout ? .timeout : .continued)
        case .abort, .edit:
            let edited = event.rawHTTPRequested ?? Data()
            var refusal: String?
            if !waiter.editable {
                refusal = "the message is compressed and its sender keeps its deflate window: it can only be sent on as it came"
            } else if event.requested == .edit, waiter.text, String(validating: edited, as: UTF8.self) == nil {
                refusal = "a text message must be UTF-8"
            }
            if let refusal {
                logger.error(
                    "refused a change to a held WebSocket message; it stays held",
                    metadata: ["BREAKPOINT_ID": "\(id)", "WHY": "\(refusal)"])
                try? repository.withdraw(id: id)
                return true
            }
            (resolution, outcome) = event.requested == .abort ? (.drop, .aborted) : (.edited(edited), .edited)
        }
        // Taken now; gone meanwhile (the socket closed): its close resolved it.
        let taken = messageWaiters.withLock { table -> Bool in
            guard let key = table.first(where: { $0.value.id == id })?.key else { return false }
            table.removeValue(forKey: key)
            return true
        }
        guard taken else { return true }
        finishMessage(
            id: id, waiter: waiter, resolution, outcome, final: { if case let .edited(data) = resolution { data } else { nil } }())
        return true
    }

    /// The socket closed while its message was held: nothing is sent.
    func messageSocketClosed(requestID: String) {
        let gone: [MessageWaiter] = messageWaiters.withLock { table in
            var gone: [MessageWaiter] = []
            for kind in [BreakpointEvent.Kind.messageFromClient, .messageFromServer] {
                let key = Self.key(requestID, kind)
                guard var waiter = table[key] else { continue }
                guard waiter.id != nil else {
                    // Not recorded yet: `pauseMessage` finishes this.
                    waiter.cancelled = true
                    table[key] = waiter
                    continue
                }
                table.removeValue(forKey: key)
                gone.append(waiter)
            }
            return gone
        }
        for waiter in gone {
            guard let id = waiter.id else { continue }
            NIOThreadPool.singleton.submit { _ in self.finishMessage(id: id, waiter: waiter, .gone, .clientClosed, final: nil) }
        }
    }

    func abandonMessages() {
        let all = messageWaiters.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for waiter in all {
            if let id = waiter.id { try? repository?.resolve(id: id, .abandoned, final: nil) }
            waiter.promise.succeed(.gone)
        }
    }

    private func finishMessage(
        id: Int64, waiter: MessageWaiter, _ resolution: MessageResolution, _ outcome: BreakpointEvent.Outcome, final: Data?
    ) {
        let eventLoop = waiter.promise.futureResult.eventLoop
        let recorded = records?.recordBreakpointOutcome(id: id, outcome, final: final, on: eventLoop) ?? eventLoop.makeSucceededVoidFuture()
        let logger = logger
        recorded.whenComplete { result in
            if case let .failure(error) = result {
                logger.error("cannot record a breakpoint's outcome", metadata: ["BREAKPOINT_ID": "\(id)", "ERROR": "\(error)"])
            }
            logger.info(
                "resumed a WebSocket message held at a breakpoint", metadata: ["BREAKPOINT_ID": "\(id)", "OUTCOME": "\(outcome.rawValue)"])
            waiter.promise.succeed(resolution)
        }
    }
}
