import BusymateShared
import CaptureStore
import Foundation
import Logging

/// What the open pages are told, live. Shared state (in-flight exchanges,
/// held messages, status) is computed once here and cached as text; each
/// connection then reads the rows its own filter keeps, at its own pace:
/// a slow page gets a bigger batch later, never a queue without end.
public actor LiveFeed {
    public enum Signal: Sendable { case traffic, open, held, status, cleared, messages }

    private let reader: CaptureReader
    let status: StatusSource
    private let logger = Logger(label: "busymate.web")
    private var subscribers: [UInt64: AsyncStream<Signal>.Continuation] = [:]
    private var nextID: UInt64 = 0
    /// The last id stored, as `poll` last saw it.
    private var lastSeen: Int64 = 0
    /// The last WebSocket message stored, likewise (nil: not looked yet).
    private var lastMessage: Int64?
    /// The last socket close, as the last look saw it.
    private var closedSockets: Int64?
    /// The sockets that had new messages at the last look: an open
    /// Messages tab of one of them reads what is new.
    public private(set) var messagesMessage = #"{"type":"messages","sockets":[]}"#

    /// The latest messages of each shared kind, as sent.
    public private(set) var openMessage = #"{"type":"open","entries":[]}"#
    public private(set) var heldMessage = #"{"type":"held","held":[]}"#
    public private(set) var statusMessage: String?

    public init(reader: CaptureReader, status: StatusSource) {
        self.reader = reader
        self.status = status
    }

    public var subscriberCount: Int { subscribers.count }

    /// A connection's wake-ups: kinds only, coalesced (what changed is read
    /// when the connection gets to it).
    public func subscribe() -> (id: UInt64, signals: AsyncStream<Signal>) {
        nextID += 1
        let (stream, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(8))
        subscribers[nextID] = continuation
        return (nextID, stream)
    }

    public func unsubscribe(_ id: UInt64) {
        subscribers.removeValue(forKey: id)?.finish()
    }

    func broadcast(_ signal: Signal) {
        for continuation in subscribers.values { continuation.yield(signal) }
    }

    /// Ends every connection's stream (shutdown).
    public func finish() {
        for continuation in subscribers.values { continuation.finish() }
        subscribers = [:]
    }

    // MARK: sources

    public func notified(_ name: NotificationName) async {
        switch name {
        case .newTrafficCaptured: broadcast(.traffic)
        case .openExchangesChanged: await refreshOpen()
        case .breakpointPaused, .breakpointContinue: await refreshHeld()
        default: break
        }
    }

    /// Once a second while a page is open: status, and the in-flight and
    /// held sets again in case a datagram was lost (new rows: `poll`).
    public func tick() async {
        guard !subscribers.isEmpty else { return }
        if let report = await status.json() {
            statusMessage = JSONWriter.compact(ExchangeJSON.object([("type", ExchangeJSON.string("status")), ("status", report)]))
            broadcast(.status)
        }
        await refreshOpen()
        await refreshHeld()
    }

    /// Ten times a second while a page is open: `newTrafficCaptured` is
    /// throttled to one post per 0.5 s (DESIGN), and a live list should not
    /// lag by that much. A look at the last id is one index probe.
    public func poll() async {
        guard !subscribers.isEmpty else { return }
        await pollMessages()
        guard let last = try? await reader.read({ try $0.traffic.lastID() }) else { return }
        guard last != lastSeen else { return }
        lastSeen = last
        broadcast(.traffic)
    }

    /// New WebSocket messages, or sockets that closed: which sockets, as they are now.
    private func pollMessages() async {
        let (seen, closedBefore) = (lastMessage, closedSockets)
        guard
            let (last, closedNow, sockets) = try? await reader.read({ repos -> (Int64, Int64, [Int64: WebSocketRecord]) in
                let last = try repos.sockets.lastMessageID()
                let closed = try repos.sockets.closed(after: closedBefore)
                var ids = closed.ids
                if let seen, last > seen { ids += try repos.sockets.sockets(withMessagesAfter: seen) }
                return (last, closed.last, ids.isEmpty ? [:] : try repos.sockets.sockets(exchangeIDs: ids))
            })
        else { return }
        (lastMessage, closedSockets) = (last, closedNow)
        guard !sockets.isEmpty else { return }
        let nodes = sockets.sorted { $0.key < $1.key }.map { id, socket in
            ExchangeJSON.object([("id", ExchangeJSON.number(id)), ("websocket", WebSocketJSON.socket(socket))])
        }
        messagesMessage = JSONWriter.compact(
            ExchangeJSON.object([("type", ExchangeJSON.string("messages")), ("sockets", ExchangeJSON.array(nodes))]))
        broadcast(.messages)
    }

    func refreshOpen() async {
        let paths = reader.paths
        let all = OpenExchangesFile.read(paths)?.entries ?? []
        let ids = all.map(\.requestID)
        // The file lags the store by up to 0.25 s: an exchange already stored is no longer in flight.
        let (held, stored) =
            (try? await reader.read { repos in
                (try repos.breakpoints.held(among: ids), try repos.traffic.storedRequestIDs(among: ids))
            }) ?? ([], [])
        let entries = all.filter { !stored.contains($0.requestID) }
        let message = JSONWriter.compact(
            ExchangeJSON.object([
                ("type", ExchangeJSON.string("open")),
                (
                    "entries",
                    ExchangeJSON.array(
                        entries.map { e in
                            ExchangeJSON.object([
                                ("request_id", ExchangeJSON.string(e.requestID)), ("started_at", ExchangeJSON.date(e.startedAt)),
                                ("method", ExchangeJSON.string(e.method)), ("url", ExchangeJSON.string(e.url)),
                                ("held", ExchangeJSON.bool(held.contains(e.requestID))),
                            ])
                        })
                ),
            ]))
        guard message != openMessage else { return }
        openMessage = message
        broadcast(.open)
    }

    func refreshHeld() async {
        guard let held = try? await reader.read({ repos in try repos.breakpoints.held() }) else { return }
        let message = JSONWriter.compact(
            ExchangeJSON.object([("type", ExchangeJSON.string("held")), ("held", ExchangeJSON.array(held.map(HeldJSON.node)))]))
        guard message != heldMessage else { return }
        heldMessage = message
        broadcast(.held)
    }
}

/// A held message as the page edits it.
enum HeldJSON {
    /// A WebSocket message that is not text (or not UTF-8) comes as `binary`
    /// with `raw_base64`; `raw` then shows it, and is no edit.
    static func node(_ e: BreakpointEvent) -> JSONNode {
        let text = String(validating: e.rawHTTPInitial, as: UTF8.self)
        let binary = e.kind.isMessage && (e.method != "TEXT" || text == nil)
        var members: [ExchangeJSON.Member] = [
            ("id", ExchangeJSON.number(e.id)), ("request_id", ExchangeJSON.string(e.requestID)),
            ("kind", ExchangeJSON.string(e.kind.rawValue)),
            ("paused_at", ExchangeJSON.date(e.pausedAt)), ("expires_at", ExchangeJSON.date(e.expiresAt)),
            ("method", ExchangeJSON.string(e.method)), ("url", ExchangeJSON.string(e.url)),
            ("raw", ExchangeJSON.string(text ?? String(decoding: e.rawHTTPInitial, as: UTF8.self))),
        ]
        if binary {
            members += [("binary", ExchangeJSON.bool(true)), ("raw_base64", ExchangeJSON.string(e.rawHTTPInitial.base64EncodedString()))]
        }
        return ExchangeJSON.object(members)
    }
}

extension LiveFeed {
    /// Rows were stored here (an import): every page looks.
    public func stored() { broadcast(.traffic) }

    /// The capture was cleared: every page reloads its list.
    public func cleared() { broadcast(.cleared) }

    /// Wakes one connection (its filter changed).
    public func poke(_ id: UInt64) {
        subscribers[id]?.yield(.traffic)
    }
}
