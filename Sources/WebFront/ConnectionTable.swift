import NIOCore
import Synchronization

/// The connections being served, and since when each has been waiting for
/// a request (nil while one is answered). When the table is full, the
/// connection that has waited longest makes room: clients that trickle
/// request heads, or send nothing, cannot keep a newcomer out, while a
/// request being answered (a live page's WebSocket, an export) is never cut.
final class ConnectionTable: Sendable {
    private struct Entry {
        let channel: any Channel
        var waitingSince: NIODeadline?
        /// Called when the connection goes, while a request is answered.
        var onLeave: (@Sendable () -> Void)?
    }

    private struct State {
        var next = 0
        var entries: [Int: Entry] = [:]
        var ids: [ObjectIdentifier: Int] = [:]
    }

    let limit: Int
    private let state = Mutex(State())

    init(limit: Int) { self.limit = limit }

    /// The new connection's id, or nil when every slot is answering a request.
    func admit(_ channel: any Channel) -> Int? {
        let (id, evicted) = state.withLock { state -> (Int?, (any Channel)?) in
            var evicted: (any Channel)?
            if state.entries.count >= limit {
                guard
                    let oldest = state.entries.filter({ $0.value.waitingSince != nil })
                        .min(by: { ($0.value.waitingSince ?? .distantFuture) < ($1.value.waitingSince ?? .distantFuture) })
                else { return (nil, nil) }
                state.entries[oldest.key] = nil
                state.ids[ObjectIdentifier(oldest.value.channel)] = nil
                evicted = oldest.value.channel
            }
            state.next += 1
            state.entries[state.next] = Entry(channel: channel, waitingSince: .now())
            state.ids[ObjectIdentifier(channel)] = state.next
            return (state.next, evicted)
        }
        evicted?.close(promise: nil)
        return id
    }

    func waiting(_ id: Int, since: NIODeadline?) {
        state.withLock { state in state.entries[id]?.waitingSince = since }
    }

    func leave(_ id: Int) {
        let gone = state.withLock { state in
            let entry = state.entries.removeValue(forKey: id)
            if let entry { state.ids[ObjectIdentifier(entry.channel)] = nil }
            return entry?.onLeave
        }
        gone?()
    }

    /// Sets (or, nil, clears) what to do if `channel`'s client goes; done at
    /// once if it is gone already.
    func onLeave(_ channel: any Channel, _ action: (@Sendable () -> Void)?) {
        let gone = state.withLock { state -> Bool in
            guard let id = state.ids[ObjectIdentifier(channel)] else { return true }
            state.entries[id]?.onLeave = action
            return false
        }
        if gone { action?() }
    }
}
