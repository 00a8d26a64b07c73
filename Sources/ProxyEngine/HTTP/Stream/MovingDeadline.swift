import NIOCore

/// A deadline moved at every request (or body piece), kept with at most
/// one scheduled check: moving it later is a clock read, not a timer; a
/// check that fires early looks again, and only a nearer deadline re-arms
/// it at once. Confined to its event loop.
final class MovingDeadline {
    private let expired: () -> Void
    private var due: NIODeadline?
    private var check: Scheduled<Void>?
    private var checkAt: NIODeadline?

    init(expired: @escaping () -> Void) { self.expired = expired }

    /// Due `amount` from now (the loop's clock, which a test can move).
    func set(after amount: TimeAmount, on eventLoop: EventLoop) {
        set(at: eventLoop.now + amount, on: eventLoop)
    }

    /// Due at `due` (a deadline on the loop's clock).
    func set(at due: NIODeadline, on eventLoop: EventLoop) {
        self.due = due
        if let at = checkAt, at <= due { return }
        arm(at: due, on: eventLoop)
    }

    /// No deadline now: a pending check finds none.
    func clear() { due = nil }

    /// Clears it and drops the pending check (which would keep its owner
    /// alive until it fired).
    func cancel() {
        due = nil
        check?.cancel()
        check = nil
        checkAt = nil
    }

    private func arm(at when: NIODeadline, on eventLoop: EventLoop) {
        check?.cancel()
        checkAt = when
        check = eventLoop.assumeIsolated().scheduleTask(deadline: when) { [self] in
            check = nil
            checkAt = nil
            guard let due else { return }
            if eventLoop.now < due {
                arm(at: due, on: eventLoop)
                return
            }
            self.due = nil
            expired()
        }
    }
}
