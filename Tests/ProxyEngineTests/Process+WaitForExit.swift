import Foundation
import Synchronization

/// One spawn at a time in this test module: Foundation's `Process.run`,
/// called from many parallel test tasks at once, crashed the test process
/// (a bad pointer in its memcpy).
private let spawnLock = Mutex(())

extension Process {
    /// `run()`, one at a time.
    func runSerialized() throws {
        try spawnLock.withLock { _ in try run() }
    }

    /// Waits for the program to exit by polling, without running a run
    /// loop: Foundation's `waitUntilExit` spins the calling thread's
    /// RunLoop, and called from parallel test tasks (Swift concurrency's
    /// threads) it has crashed the test process and hung it.
    func waitForExit() {
        while isRunning { usleep(2_000) }
    }
}
