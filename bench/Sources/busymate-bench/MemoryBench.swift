import Foundation
import NIOCore

/// Target 7: the proxy's resident memory under 1,000 keep-alive
/// connections, and while one client streams 1 GiB through it.
enum MemoryBench {
    struct Result {
        /// Right after start, and idle after the throughput scenarios.
        var freshKiB: Int
        var idleKiB: Int
        var atThousandKiB: Int
        var downloadKiB: (start: Int, max: Int)
        var downloadMBps: Double
    }

    /// The peak RSS under a crowd of connections, and the load it carried.
    struct Crowd {
        var kib: Int
        var result: LoadResult
    }

    static func rss(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// Runs `plan` while sampling `pid`'s RSS every 50 ms; returns the largest.
    static func peak(of pid: Int32, during plan: LoadPlan, group: EventLoopGroup) async throws -> (kib: Int, result: LoadResult) {
        let sampler = Task {
            var most = 0
            while !Task.isCancelled {
                most = max(most, rss(pid))
                try? await Task.sleep(for: .milliseconds(50))
            }
            return most
        }
        let result = try await LoadGenerator.run(plan, group: group)
        sampler.cancel()
        return (max(await sampler.value, rss(pid)), result)
    }
}
