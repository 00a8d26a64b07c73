import BusymateShared
import Foundation
import Logging

/// When to start a child (the tunnel, the web front) again after it
/// exited: 0.1 s, doubling per exit in the last minute, capped at `max`;
/// five exits within a minute is a crash loop.
struct RestartBackoff {
    let max: Double
    private(set) var exits: [Date] = []

    init(max: Double) { self.max = max }

    /// Counts an exit now; the wait before the next start.
    mutating func exited(at now: Date = Date()) -> Double {
        exits = exits.filter { now.timeIntervalSince($0) < 60 } + [now]
        return min(max, 0.1 * pow(2, Double(exits.count - 1)))
    }

    func crashLoop(at now: Date = Date()) -> Bool { exits.filter { now.timeIntervalSince($0) < 60 }.count >= 5 }

    mutating func reset() { exits = [] }
}

/// Children the supervisor did not start (adopted) or is stopping.
enum ChildProcesses {
    static func isGone(_ pid: Int32) -> Bool { !ProcessProbe.isAlive(pid) || ProcessProbe.isZombieOrGone(pid) }

    /// Returns once `pid` is gone: an adopted child is not ours to wait for.
    static func waitUntilGone(_ pid: Int32) async {
        while !isGone(pid) { try? await Task.sleep(for: .milliseconds(100)) }
    }

    /// SIGTERM to each, then SIGKILL to those still there after `seconds`.
    static func stop(_ pids: [Int32], within seconds: Double, logger: Logger, what: String) async {
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, pids.contains(where: { !isGone($0) }) {
            try? await Task.sleep(for: .milliseconds(50))
        }
        for pid in pids where !isGone(pid) {
            logger.warning("\(what) did not stop in time; killing it", metadata: ["PID": "\(pid)"])
            kill(pid, SIGKILL)
        }
    }
}
