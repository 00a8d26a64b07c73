import Foundation

/// How busy each core was between two readings of /proc/stat: the check that
/// the servers' core, not the load generator's, is the one that saturates.
struct CoreLoad {
    private var busy: [Int: Double] = [:]
    private var total: [Int: Double] = [:]

    static func read() -> CoreLoad {
        var load = CoreLoad()
        let text = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("cpu") && !line.hasPrefix("cpu ") {
            let fields = line.split(separator: " ")
            guard let core = Int(fields[0].dropFirst(3)) else { continue }
            let ticks = fields.dropFirst().compactMap { Double($0) }
            guard ticks.count >= 5 else { continue }
            let sum = ticks.prefix(8).reduce(0, +)
            load.total[core] = sum
            load.busy[core] = sum - ticks[3] - ticks[4]  // idle, iowait
        }
        return load
    }

    /// The fraction of `core` busy since `earlier`.
    func busy(_ core: Int, since earlier: CoreLoad) -> Double {
        guard let b1 = busy[core], let b0 = earlier.busy[core], let t1 = total[core], let t0 = earlier.total[core], t1 > t0 else {
            return .nan
        }
        return (b1 - b0) / (t1 - t0)
    }
}

/// The CPU time a process's threads have had, from each thread's
/// `schedstat` (nanoseconds): per-exchange cost, whatever the throughput.
enum ProcessCPU {
    /// NaN when nothing could be read (the process is gone, or not ours to read).
    static func seconds(_ pid: Int32) -> Double {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        let times = tasks.compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8)).flatMap {
                Double($0.split(separator: " ").first ?? "")
            }
        }
        return times.isEmpty ? .nan : times.reduce(0, +) / 1e9
    }
}
