import NIOCore

/// The deadlines of many owners on one event loop (the streams of one
/// HTTP/2 client connection) behind one scheduled check. A task per
/// stream, cancelled as each stream ends, made every cancel a search of
/// NIO's task heap, linear in the streams in flight. Here setting and
/// clearing are a dictionary's; the check, when it fires, looks at each
/// entry and re-arms for the nearest left. Confined to its event loop.
final class DeadlineGroup {
    private struct Entry {
        var due: NIODeadline
        var expired: () -> Void
    }

    let eventLoop: EventLoop
    private var entries: [Int: Entry] = [:]
    private var lastID = 0
    private var check: Scheduled<Void>?
    private var checkAt: NIODeadline?

    init(eventLoop: EventLoop) { self.eventLoop = eventLoop }

    /// A name for one owner's deadline.
    func makeID() -> Int {
        lastID += 1
        return lastID
    }

    /// `id`'s deadline is `due`: `expired` runs once then, unless cleared first.
    func set(_ id: Int, at due: NIODeadline, expired: @escaping () -> Void) {
        entries[id] = Entry(due: due, expired: expired)
        if let at = checkAt, at <= due { return }
        arm(at: due)
    }

    /// No deadline for `id`: the pending check, if any, finds nothing of it.
    func clear(_ id: Int) { entries[id] = nil }

    /// Deadlines waiting (for tests).
    var count: Int { entries.count }

    private func arm(at when: NIODeadline) {
        check?.cancel()
        checkAt = when
        check = eventLoop.assumeIsolated().scheduleTask(deadline: when) { [self] in
            check = nil
            checkAt = nil
            fire()
        }
    }

    private func fire() {
        let now = eventLoop.now
        var due: [Entry] = []
        var nearest: NIODeadline?
        for (id, entry) in entries {
            if entry.due <= now {
                due.append(entry)
                entries[id] = nil
            } else if nearest.map({ entry.due < $0 }) ?? true {
                nearest = entry.due
            }
        }
        if let nearest { arm(at: nearest) }
        for entry in due { entry.expired() }
    }
}
