import CaptureStore
import Synchronization

/// A slow read's handle while its query runs, so that cancelling the read
/// (from any thread) interrupts that query, and one not started yet never
/// starts.
final class RunningQuery: Sendable {
    private struct State {
        var database: CaptureDatabase?
        var cancelled = false
    }

    private let state = Mutex(State())

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    func start(_ database: CaptureDatabase) throws {
        try state.withLock { state in
            guard !state.cancelled else { throw CancellationError() }
            state.database = database
        }
    }

    func finish() {
        state.withLock { $0.database = nil }
    }

    func cancel() {
        state.withLock { state in
            state.cancelled = true
            // SQLite stops the statement at its next step; a no-op between statements.
            state.database?.pool.interrupt()
        }
    }
}
