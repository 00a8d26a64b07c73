import CaptureStore
import Synchronization

/// The capture writer's queue of WebSocket events (opened, messages,
/// closed), taken whole at each commit after the rows, and the sockets whose
/// rows are gone while they are open (retention, "clear"), so their
/// captures stop storing messages.
final class WebSocketEventQueue: Sendable {
    private let queue = Mutex<[WebSocketEvent]>([])
    private let dropped = Mutex<Set<String>>([])
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Queues `event`; past the limit the oldest messages go (a socket's
    /// opening and close are kept). Returns the rows that went.
    func append(_ event: WebSocketEvent) -> Int {
        queue.withLock { queue -> Int in
            queue.append(event)
            guard queue.count > limit else { return 0 }
            guard let oldest = queue.firstIndex(where: { if case .messages = $0 { true } else { false } }) else { return 0 }
            return queue.remove(at: oldest).weight
        }
    }

    /// Everything queued, oldest first.
    func take() -> [WebSocketEvent] {
        queue.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
    }

    /// A failed commit's events, back in front.
    func putBack(_ events: [WebSocketEvent]) {
        queue.withLock { $0.insert(contentsOf: events, at: 0) }
    }

    /// After a commit: sockets whose rows were gone, and those that closed (forgotten).
    func committed(_ events: [WebSocketEvent], gone: Set<String>) {
        let closed = Set(events.compactMap { if case let .closed(c) = $0 { c.requestID } else { nil } })
        guard !gone.isEmpty || !closed.isEmpty else { return }
        dropped.withLock { $0 = $0.union(gone).subtracting(closed) }
    }

    func isDropped(_ requestID: String) -> Bool { dropped.withLock { $0.contains(requestID) } }
}
