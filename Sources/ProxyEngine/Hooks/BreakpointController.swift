import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// What to do with a held message once it is resolved.
enum BreakpointResolution: Sendable {
    /// Send it on: as held, or as edited (re-framed).
    case forward(RawHTTPMessage, edited: Bool)
    /// A request gets an error answer; a response's client is hung up on.
    case abort(id: Int64)
    /// Nobody is left to send it to (the client left; the tunnel stops).
    case dropped
}

/// The tunnel's breakpoints: which messages to hold (`settings.json`'s
/// `breakpoints`), and every message held now, process-wide. A held message
/// is a `breakpoint_events` row, recorded (and its outcome too) through the
/// capture sink, off the event loops; `busymate breakpoints` asks for its
/// resolution in the row and posts `breakpointContinue`, and this carries
/// the request out. SQLite settles who asked first (a person or the timeout).
public final class BreakpointController: Sendable {
    private struct Waiter {
        var id: Int64?
        let kind: BreakpointEvent.Kind
        let original: RawHTTPMessage
        /// A response to HEAD, or a 204/304: sent without a body whatever its length header says.
        let bodyless: Bool
        let promise: EventLoopPromise<BreakpointResolution>
        /// The client left before the row was written.
        var cancelled = false
    }

    let settings = Mutex(BreakpointSettings())
    private let any = Atomic<Bool>(false)
    private let filters = Atomic<Bool>(false)
    private let store: StoreHandle?
    /// Where held messages and their outcomes are recorded (nil: nothing is held).
    let records: (any CaptureSink)?
    /// Reads requests, and asks for the timeout; always off the event loops.
    /// Taken at each use: the store may be replaced (a corrupt file).
    var repository: BreakpointRepository? { store.map { BreakpointRepository(database: $0.database) } }
    let notifier: Notifier?
    private let groupPath: String
    /// Held messages by their exchange's request id (one at a time each).
    private let waiters = Mutex<[String: Waiter]>([:])
    /// Held WebSocket messages (BreakpointController+Messages.swift).
    let messageWaiters = Mutex<[String: MessageWaiter]>([:])
    let logger = Logger(label: "busymate.breakpoint")
    /// A message larger than this is forwarded rather than held.
    static let maxHeldBytes = 16 << 20

    /// `records`: the capture sink (held messages are rows of the capture store).
    public init(store: StoreHandle?, records: (any CaptureSink)? = nil, notifier: Notifier?, groupPath: String) {
        self.store = store
        self.records = records
        self.notifier = notifier
        self.groupPath = groupPath
    }

    public func apply(_ settings: AppSettings) {
        self.settings.withLock { $0 = settings.breakpoints }
        any.store(!settings.breakpoints.isEmpty, ordering: .relaxed)
        filters.store((settings.breakpoints.request + settings.breakpoints.response).contains(where: \.isFilter), ordering: .relaxed)
        if !settings.breakpoints.isEmpty && (store == nil || records == nil) {
            logger.error("breakpoints are set but the capture store is not open: nothing will be held")
        }
    }

    /// Messages held now (recorded, not yet resolved), for `status`.
    public var heldCount: Int {
        waiters.withLock { $0.values.filter { $0.id != nil }.count } + messageWaiters.withLock { $0.values.filter { $0.id != nil }.count }
    }

    /// No patterns: the data path does not look further.
    public var isEmpty: Bool { !any.load(ordering: .relaxed) }

    /// Some pattern is a filter: the exchange is described whole for it (`FilterSubject`).
    public var usesFilters: Bool { filters.load(ordering: .relaxed) }

    /// Whether a `kind` pattern matches `url` (a URL pattern) or `exchange` (a filter; none without it).
    public func holds(_ kind: BreakpointEvent.Kind, _ url: String, exchange: FilterSubject?) -> Bool {
        guard any.load(ordering: .relaxed), store != nil, records != nil else { return false }
        let subject = URLPattern.Subject(url)
        let patterns = settings.withLock { s in
            switch kind {
            case .request: s.request
            case .response: s.response
            case .messageFromClient: s.messagesFromClient
            case .messageFromServer: s.messagesFromServer
            }
        }
        // One budget for all of this message's filters, matched outside the lock.
        let deadline = ContinuousClock.now.advanced(by: RuleMatch.timeLimit)
        return patterns.contains { $0.matches(url: subject, exchange: exchange, until: deadline) == true }
    }

    /// Holds `message`: records it, posts `breakpointPaused`, and completes
    /// on `eventLoop` once it is resolved (or times out).
    func pause(
        _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, requestID: String, method: String, url: String,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution> {
        let promise = eventLoop.makePromise(of: BreakpointResolution.self)
        guard let records else {
            promise.succeed(.forward(message, edited: false))
            return promise.futureResult
        }
        waiters.withLock { $0[requestID] = Waiter(kind: kind, original: message, bodyless: bodyless, promise: promise) }
        let now = Date()
        let (timeout, expiry) = settings.withLock { ($0.timeoutSeconds, $0.expiry(pausedAt: now)) }
        let raw = Data(message.rendered())
        let event = BreakpointEvent(
            kind: kind, requestID: requestID, method: method, url: url, rawHTTPInitial: raw, pausedAt: now,
            expiresAt: expiry, tunnelPID: getpid())
        records.recordBreakpointPause(event, on: eventLoop).whenComplete { result in
            switch result {
            case let .success(event):
                guard let id = event.id else {
                    self.forwardUnrecorded(requestID, message, why: "the store gave the row no id")
                    return
                }
                self.registered(id: id, requestID: requestID, kind: kind, url: url, timeout: timeout, on: eventLoop)
            case let .failure(error):
                self.forwardUnrecorded(requestID, message, why: "\(error)")
            }
        }
        return promise.futureResult
    }

    /// Not recorded, so nobody could resolve it: it goes on at once.
    private func forwardUnrecorded(_ requestID: String, _ message: RawHTTPMessage, why: String) {
        logger.error("cannot record a held message; forwarding it", metadata: ["ERROR": "\(why)", "REQUEST_ID": "\(requestID)"])
        take(requestID)?.promise.succeed(.forward(message, edited: false))
    }

    private func registered(id: Int64, requestID: String, kind: BreakpointEvent.Kind, url: String, timeout: Double, on eventLoop: EventLoop)
    {
        let cancelled = waiters.withLock { table -> Bool in
            table[requestID]?.id = id
            return table[requestID]?.cancelled ?? true
        }
        if cancelled {
            clientLeft(requestID: requestID)
            return
        }
        logger.info(
            "held a \(kind.rawValue) at a breakpoint", metadata: ["BREAKPOINT_ID": "\(id)", "REQUEST_ID": "\(requestID)", "URL": "\(url)"])
        notifier?.post(.breakpointPaused, payload: "\(id)")
        // 0: held until someone resolves it (or the client leaves).
        guard timeout > 0 else { return }
        eventLoop.scheduleTask(in: .milliseconds(Int64(timeout * 1000))) {
            self.timedOut(id: id)
        }
    }

    func timedOut(id: Int64) {
        guard let repository else { return }
        let waiting: @Sendable () -> Bool = {
            self.waiters.withLock { $0.values.contains { $0.id == id } }
                || self.messageWaiters.withLock { $0.values.contains { $0.id == id } }
        }
        guard waiting() else { return }
        NIOThreadPool.singleton.submit { _ in
            // Loses to anyone who asked first; then their request is carried
            // out. Asked again if that was an edit refused (withdrawn).
            for _ in 0..<2 where waiting() {
                _ = try? repository.request(id: id, .timeout)
                self.carryOutRequests()
            }
        }
    }

    /// Carries out what was asked of the messages this tunnel holds (after
    /// `breakpointContinue`, and now and then in case a post was lost).
    /// Blocking: call off the event loops.
    public func carryOutRequests() {
        guard let repository, waiters.withLock({ !$0.isEmpty }) || messageWaiters.withLock({ !$0.isEmpty }) else { return }
        let asked: [BreakpointRepository.Pending]
        do {
            asked = try repository.pending()
        } catch {
            logger.error("cannot read breakpoint requests", metadata: ["ERROR": "\(error)"])
            return
        }
        for event in asked {
            let (id, requested) = (event.id, event.requested)
            if carryOutMessage(event, repository: repository) { continue }
            guard let waiter = take(id: id) else { continue }
            let resolution: BreakpointResolution
            let outcome: BreakpointEvent.Outcome
            switch requested {
            case .continue, .timeout:
                resolution = .forward(waiter.original, edited: false)
                outcome = requested == .timeout ? .timeout : .continued
            case .abort:
                resolution = .abort(id: id)
                outcome = .aborted
            case .edit:
                do {
                    var edited = try RawHTTPMessage.parse(Array(event.rawHTTPRequested ?? Data()), as: waiter.original.kind)
                    try edited.checkEditable(replacing: waiter.original)
                    edited.frame(bodyless: waiter.bodyless || edited.isBodylessStatus)
                    resolution = .forward(edited, edited: true)
                    outcome = .edited
                } catch {
                    // The CLI checks edits first; this one came some other way.
                    logger.error("refused an edited message; it stays held", metadata: ["BREAKPOINT_ID": "\(id)", "ERROR": "\(error)"])
                    try? repository.withdraw(id: id)
                    waiters.withLock { $0[event.requestID] = waiter }
                    continue
                }
            }
            finish(id: id, waiter: waiter, resolution: resolution, outcome: outcome)
        }
    }

    /// The client went away: nothing is sent, and the row says why.
    func clientLeft(requestID: String) {
        let waiter: Waiter? = waiters.withLock { table in
            guard var waiter = table[requestID] else { return nil }
            guard waiter.id != nil else {
                // Not recorded yet: `registered` finishes this.
                waiter.cancelled = true
                table[requestID] = waiter
                return nil
            }
            return table.removeValue(forKey: requestID)
        }
        guard let waiter, let id = waiter.id else { return }
        NIOThreadPool.singleton.submit { _ in self.finish(id: id, waiter: waiter, resolution: .dropped, outcome: .clientClosed) }
    }

    /// The tunnel stops: whatever is held is let go, and recorded so.
    public func abandonAll() {
        let all = waiters.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for waiter in all {
            if let id = waiter.id { try? repository?.resolve(id: id, .abandoned, final: nil) }
            waiter.promise.succeed(.dropped)
        }
        abandonMessages()
    }

    /// At start: messages held by a tunnel that is gone stay held no more.
    public func abandonOrphans() {
        let own = getpid()
        let groupPath = self.groupPath
        do {
            let count = try repository?.abandon(unless: { pid in pid != own && ProcessProbe.isTunnel(pid, servingGroup: groupPath) }) ?? 0
            if count > 0 { logger.notice("marked messages held by a gone tunnel as abandoned", metadata: ["COUNT": "\(count)"]) }
        } catch {
            logger.error("cannot mark abandoned breakpoints", metadata: ["ERROR": "\(error)"])
        }
    }

    /// The outcome is on the row before the message goes on: whoever reads
    /// the row after the answer reads how it ended.
    private func finish(id: Int64, waiter: Waiter, resolution: BreakpointResolution, outcome: BreakpointEvent.Outcome) {
        var final: Data?
        if case let .forward(message, _) = resolution { final = Data(message.rendered()) }
        let eventLoop = waiter.promise.futureResult.eventLoop
        let recorded = records?.recordBreakpointOutcome(id: id, outcome, final: final, on: eventLoop) ?? eventLoop.makeSucceededVoidFuture()
        let logger = logger
        recorded.whenComplete { result in
            if case let .failure(error) = result {
                logger.error("cannot record a breakpoint's outcome", metadata: ["BREAKPOINT_ID": "\(id)", "ERROR": "\(error)"])
            }
            logger.info(
                "resumed a \(waiter.kind.rawValue) held at a breakpoint",
                metadata: ["BREAKPOINT_ID": "\(id)", "OUTCOME": "\(outcome.rawValue)"])
            waiter.promise.succeed(resolution)
        }
    }

    private func take(_ requestID: String) -> Waiter? {
        waiters.withLock { $0.removeValue(forKey: requestID) }
    }

    private func take(id: Int64) -> Waiter? {
        waiters.withLock { table in
            guard let key = table.first(where: { $0.value.id == id })?.key else { return nil }
            return table.removeValue(forKey: key)
        }
    }
}
