import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Cloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The pairing and the cloud sink.",
        subcommands: [CloudStatus.self, CloudPostgres.self], defaultSubcommand: CloudStatus.self)
}

struct CloudPostgres: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "postgres",
        abstract: "Send every exchange to a team's own PostgreSQL as well (root).",
        discussion: """
            URL is postgres://USER:PASSWORD@HOST[:PORT]/DATABASE[?sslmode=disable|require|verify-full]; TLS is verified unless \
            sslmode says otherwise, and sslmode=disable is for this machine only. The database holds the same `entries` table as \
            the account's cloud (partitioned by day, unique (request_id, ts)); the tunnel's second sink inserts into it with \
            ON CONFLICT DO NOTHING, from the moment it is set. The URL (with its password) is kept in the supervisor's private \
            directory and mirrored to the tunnel only.
            """)

    @OptionGroup var options: GroupOption
    @Argument(help: "The database's URL; - reads it from stdin (keeps the password out of the process list and shell history).") var url:
        String?
    @Flag(name: .long, help: "Stop sending to the team database.") var off = false

    func validate() throws {
        if off == (url != nil) { throw ValidationError("give a URL, or --off") }
    }

    func run() async throws {
        var message = ControlMessage(.teamDatabase)
        message.url = off ? nil : url
        if url == "-" { message.url = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces) }
        print(try ControlClient.request(message, paths: options.paths).message ?? "ok")
    }
}

struct CloudStatus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Pairing, backlog (rows not sent yet), last push, lag, errors and throughput of each cloud sink.",
        discussion:
            "Exit status: 0 when the sinks send (or are idle), 1 when re-pairing is needed or a sink is refused, 2 when nothing is configured (not paired, no team database)."
    )

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
            if let uuid = report.deviceUUID {
                lines.append("device       \(report.name.map { "\"\($0)\" " } ?? "")\(uuid)\(report.api.map { " on \($0)" } ?? "")")
            }
            for sink in report.sinks { lines.append("sink         " + Self.sinkLine(sink)) }
            if let realtime = report.sinks.lazy.compactMap(\.realtime).first { lines.append("realtime     \(realtime)") }
            if report.state == "paired" && report.sinks.isEmpty { lines.append("sink         the tunnel has not reported yet") }
            print(lines.joined(separator: "\n"))
        }
        if report.sinks.contains(where: { $0.state == .refused || $0.state == .rePairRequired }) || report.state == "re-pair required" {
            throw ExitCode(1)
        }
        if report.state == "not paired" && report.sinks.isEmpty { throw ExitCode(2) }
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
        if let next = sink.nextAttemptAt, sink.state == .backingOff {
            parts.append(String(format: "next try in %.0f s", max(0, next.timeIntervalSinceNow)))
        }
        return parts.joined(separator: " · ")
    }
}
