import BusymateShared
import Foundation

/// The cloud sinks: how many rows a second one appliance pushes to the
/// PostgREST contract double (Python, in front of PostgreSQL 15) and
/// straight to PostgreSQL, each draining a backlog made while its target
/// was away; and the keep-alive cells with the account's sink sending
/// beside them against the same cells unpaired, in turns.
enum CloudBench {
    struct Drain {
        var rows: Int
        var seconds: Double
        var rowsPerSecond: Double { seconds > 0 ? Double(rows) / seconds : 0 }
    }

    struct Cell {
        var round: Int
        var sinkOn: Bool
        var scenario: String
        var result: LoadResult
        /// The sink's backlog when the cell ended (on only).
        var backlog: Int?
    }

    struct Result {
        var postgrest: Drain?
        var postgres: Drain?
        var cells: [Cell] = []
        var notes: [String] = []
    }

    /// Even: as many turns start with the sink on as with it off.
    static let rounds = 4

    /// The helper (`bench/cloud-double.py`): PostgreSQL and the double, on `core`.
    final class Server {
        let process = Process()
        private let input = Pipe()
        private let output = Pipe()
        private var buffered = Data()
        let url: String
        let anonKey: String
        let teamURL: String

        init(core: Int) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            process.arguments = ["-c", "\(core)", "python3", "bench/cloud-double.py"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            var first: [String: String] = [:]
            let line = try Self.readLine(output, &buffered)
            first = (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]) ?? [:]
            guard let url = first["url"], let anon = first["anon_key"], let team = first["team_url"] else {
                throw BenchError("bench/cloud-double.py did not start: \(line)")
            }
            self.url = url
            anonKey = anon
            teamURL = team
        }

        func ask(_ line: String) throws -> String {
            input.fileHandleForWriting.write(Data((line + "\n").utf8))
            return try Self.readLine(output, &buffered)
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }

        private static func readLine(_ pipe: Pipe, _ buffered: inout Data) throws -> String {
            while true {
                if let end = buffered.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffered[buffered.startIndex..<end], as: UTF8.self)
                    buffered = Data(buffered[(end + 1)...])
                    return line
                }
                let more = pipe.fileHandleForReading.availableData
                if more.isEmpty { throw BenchError("bench/cloud-double.py ended") }
                buffered.append(more)
            }
        }
    }

    static func cli(_ binaries: URL, _ arguments: [String], group: GroupPaths, input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = binaries.appendingPathComponent("busymate")
        process.arguments = arguments + ["--group", group.root.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try? stdin.fileHandleForWriting.close()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("busymate \(arguments.first ?? ""): \(text)") }
        return text
    }

    static func sink(_ name: String, _ group: GroupPaths) -> CloudSinkStatus? {
        TunnelStatus.read(group.status)?.cloud?.first { $0.sink == name }
    }

    static func pair(_ binaries: URL, _ double: Server, _ group: GroupPaths) throws {
        let code = try double.ask("code")
        _ = try cli(binaries, ["pair", code, "--api", double.url, "--anon-key", double.anonKey, "--name", "bench"], group: group)
        try Wait.until("the sink paired", seconds: 20) {
            sink("postgrest", group)?.state == .idle || sink("postgrest", group)?.state == .sending
        }
    }

    /// Polls `count` until it reaches `rows`; the time from the first row's
    /// arrival to the last (a backoff's wait before the first is not the sink's speed).
    static func drain(from start: Int, to rows: Int, timeout: Double, _ count: () throws -> Int) throws -> Drain {
        let deadline = Date().addingTimeInterval(timeout)
        var first: (at: Date, count: Int)?
        while Date() < deadline {
            let now = try count()
            if first == nil, now > start { first = (Date(), now) }
            if now >= rows, let first {
                return Drain(rows: rows - first.count, seconds: Date().timeIntervalSince(first.at))
            }
            usleep(100_000)
        }
        throw BenchError("the sink sent \(try count() - start) of \(rows - start) rows in \(Int(timeout)) s")
    }

    /// Sink on over sink off (medians over rounds), and how far apart the off rounds were (the noise, a fraction).
    struct Comparison {
        var onOverOff: Double
        var noise: Double
    }

    /// Each keep-alive cell's comparison, for the rate and for the tunnel's CPU per request.
    static func comparisons(_ result: Result) -> [(scenario: String, rate: Comparison, cpu: Comparison)] {
        func median(_ values: [Double]) -> Double { SettingsCostBench.median(values) ?? .nan }
        // A cell that measured nothing (no requests, no CPU figure) makes the comparison NaN: not judged.
        func compare(_ off: [Double], _ on: [Double]) -> Comparison {
            let valid = { (value: Double) in value.isFinite && value > 0 }
            guard !off.isEmpty, !on.isEmpty, off.allSatisfy(valid), on.allSatisfy(valid), let top = off.max(), let bottom = off.min()
            else { return Comparison(onOverOff: .nan, noise: .nan) }
            return Comparison(onOverOff: median(on) / median(off), noise: (top - bottom) / top)
        }
        var scenarios: [String] = []
        for cell in result.cells where !scenarios.contains(cell.scenario) { scenarios.append(cell.scenario) }
        return scenarios.map { scenario in
            let off = result.cells.filter { $0.scenario == scenario && !$0.sinkOn }.map(\.result)
            let on = result.cells.filter { $0.scenario == scenario && $0.sinkOn }.map(\.result)
            return (
                scenario, compare(off.map(\.perSecond), on.map(\.perSecond)),
                compare(off.map(\.proxyCPUPerRequest), on.map(\.proxyCPUPerRequest))
            )
        }
    }

    static func render(_ result: Result) -> String {
        var lines = [
            "| cell | sink off: req/s, tunnel CPU µs/req | sink on | on / off: req/s; CPU/req | sink backlog at the cell's end |",
            "|---|---|---|---|---|",
        ]
        func median(_ values: [Double]) -> Double { SettingsCostBench.median(values) ?? .nan }
        for (scenario, rate, cpu) in comparisons(result) {
            let off = result.cells.filter { $0.scenario == scenario && !$0.sinkOn }
            let on = result.cells.filter { $0.scenario == scenario && $0.sinkOn }
            lines.append(
                String(
                    format: "| %@ | %.0f, %.1f | %.0f, %.1f | %.2f× (off rounds differ by %.0f %%); %.2f× (by %.0f %%) | %@ |", scenario,
                    median(off.map(\.result.perSecond)), median(off.map(\.result.proxyCPUPerRequest)), median(on.map(\.result.perSecond)),
                    median(on.map(\.result.proxyCPUPerRequest)), rate.onOverOff, rate.noise * 100, cpu.onOverOff, cpu.noise * 100,
                    on.compactMap(\.backlog).map(String.init).joined(separator: ", ")))
        }
        var text = lines.joined(separator: "\n")
        if let postgrest = result.postgrest {
            text += String(
                format:
                    "\n\nRows a second one appliance sends to the PostgREST contract double (Python, in front of PostgreSQL 15 on core 1): **%.0f** (%d rows drained in %.1f s).",
                postgrest.rowsPerSecond, postgrest.rows, postgrest.seconds)
        }
        if let postgres = result.postgres {
            text += String(
                format:
                    "\nStraight to PostgreSQL (the team database sink, `jsonb_to_recordset` batches): **%.0f** rows/s (%d rows in %.1f s).",
                postgres.rowsPerSecond, postgres.rows, postgres.seconds)
        }
        for note in result.notes { text += "\n- \(note)" }
        return text
    }

    /// Rows in the local store with no row in the target yet, once the status says so (it refreshes each second).
    static func backlog(_ name: String, _ group: GroupPaths) throws -> Int {
        usleep(2_500_000)
        guard let backlog = sink(name, group)?.backlog, backlog > 0 else { throw BenchError("the \(name) sink has no backlog to drain") }
        return backlog
    }
}
