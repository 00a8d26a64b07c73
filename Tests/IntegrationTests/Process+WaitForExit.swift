import Foundation

extension Process {
    /// Waits for the program to exit by polling, without running a run
    /// loop: Foundation's `waitUntilExit` spins the calling thread's
    /// RunLoop, and called from parallel test tasks (Swift concurrency's
    /// threads) it has crashed the test process and hung it.
    func waitForExit() {
        while isRunning { usleep(2_000) }
    }
}
