import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Cloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The pairing and the cloud sink.",
        subcommands: [CloudStatus.self], defaultSubcommand: CloudStatus.self)
}

struct CloudStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Pairing, backlog (rows not sent yet), last push, lag, errors and throughput of each cloud sink.",
        discussion: "Exit status: 0 when paired and sending (or idle), 1 when re-pairing is needed or a sink fails, 2 when not paired.")

    @OptionGroup var options: GroupOption
    @Flag(name: .long, help: "Print one JSON object.") var json = false

    func run() async throws {
        let paths = options.paths
        let report: CloudReport
        do {
            report = try ControlClient.request(ControlMessage(.status), paths: paths).report?.cloud ?? CloudReport.make(nil, sinks: [])
        } catch let error as CLIError where error.description.hasPrefix("the supervisor is not running") {
            report = CloudReport.make(nil, sinks: TunnelStatus.read(paths.status)?.cloud ?? [])
        }
        if json {
            print(String(decoding: try StatusCoding.encoder.encode(report), as: UTF8.self))
        } else {
            var lines = ["pairing      \(report.detail)"]
            if let uuid = report.deviceUUID { lines.append("device       \(report.name.map { "\"\($0)\" " } ?? "")\(uuid)\(report.api.map { " on \($0)" } ?? "")") }
            for sink in report.sinks { lines.append("sink         " + Self.sinkLine(sink)) }
            if report.state == "paired" && report.sinks.isEmpty { lines.append("sink         the tunnel has not reported yet") }
            print(lines.joined(separator: "\n"))
        }
        if report.state == "not paired" { throw ExitCode(2) }
        if report.state != "paired" || report.sinks.contains(where: { $0.state == .refused || $0.state == .rePairRequired }) { throw ExitCode(1) }
    }

    static func sinkLine(_ sink: CloudSinkStatus) -> String {
        var parts = ["\(sink.sink) → \(sink.target ?? "?"): \(sink.state.rawValue)"]
        if let backlog = sink.backlog { parts.append("backlog \(backlog) row\(backlog == 1 ? "" : "s")") }
        if let lag = sink.lagSeconds, (sink.backlog ?? 0) > 0 { parts.append(String(format: "lag %.1f s", lag)) }
        parts.append("\(sink.sentRows) sent")
        if sink.rowsPerSecond > 0 { parts.append(String(format: "%.0f rows/s", sink.rowsPerSecond)) }
        if let at = sink.lastPushAt { parts.append("last push \(DatabaseDateText.iso8601(at))") }
        if let dropped = sink.droppedUnsent, dropped > 0 { parts.append("\(dropped) dropped by retention before they were sent") }
        if let rejected = sink.rejected, rejected > 0 { parts.append("\(rejected) refused by the server (413)") }
        if let error = sink.lastError, sink.state != .idle && sink.state != .sending { parts.append("error: \(error)") }
        if let next = sink.nextAttemptAt, sink.state == .backingOff { parts.append(String(format: "next try in %.0f s", max(0, next.timeIntervalSinceNow))) }
        return parts.joined(separator: " · ")
    }
}
