import ArgumentParser
import BusymateShared
import Foundation

extension Devices {
    /// `busymate devices show NAME`: one device's readiness card.
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "One device's readiness: enrolled, admitted until, PAC fetched, CA downloaded, CA trusted, traffic seen, port, mode, online."
        )
        @OptionGroup var options: GroupOption
        @Argument(help: "A device's name (or a client's address).") var name: String
        @Flag(help: "Print its row as a JSON object.") var json = false

        func run() async throws {
            guard let row = DeviceRows.read(options.paths).first(where: { $0.name == name || $0.address == name }) else {
                throw CLIError(description: "no device named \(name) (busymate devices lists them)")
            }
            if json {
                FileHandle.standardOutput.write(try StatusCoding.encoder.encode(row) + Data("\n".utf8))
                return
            }
            print(Self.card(row))
        }

        static func card(_ r: DeviceRow, now: Date = Date()) -> String {
            let time = { (date: Date) in ISO8601DateFormatter().string(from: date) }
            let mark = { (ok: Bool) in ok ? "✓" : "✗" }
            var lines = ["\(r.name)\(r.port.map { "  port \($0)" } ?? "")\(r.address.map { "  address \($0)" } ?? "")"]
            let enrolled = r.enrolledAt != nil && r.enrolment?.hasPrefix("enrolled") == true
            lines.append(
                "\(mark(enrolled)) enrolled        \(r.enrolment.map { $0 + (r.enrolledAt.map { " at \(time($0))" } ?? "") } ?? (r.named ? "no enrolment link (busymate devices link \(r.name))" : "not a named device"))"
            )
            if let until = r.admittedUntil {
                lines.append("✓ admitted until  \(time(until))\(enrolled ? " (renewed while it sends traffic)" : "")")
            } else {
                lines.append("· admitted until  - (access.allow, or not admitted from other machines)")
            }
            lines.append("\(mark(r.pacFetches > 0)) PAC fetched     \(r.pacFetches) time\(r.pacFetches == 1 ? "" : "s")")
            lines.append("\(mark(r.caDownloads > 0)) CA downloaded   \(r.caDownloads) time\(r.caDownloads == 1 ? "" : "s")")
            lines.append(
                "\(mark(r.caTrustedAt != nil)) CA trusted      \(r.caTrustedAt.map { "first intercepted handshake \(time($0))" } ?? "no intercepted handshake seen yet")"
            )
            lines.append(
                "\(mark(r.lastSeen != nil)) traffic seen    \(r.lastSeen.map { "last \(time($0)), \(r.exchangesToday) exchange\(r.exchangesToday == 1 ? "" : "s") today" } ?? "none yet")"
            )
            lines.append("  mode            \(r.source ?? "-")")
            lines.append("\(mark(r.online)) online          \(r.online ? "yes" : "no")")
            return lines.joined(separator: "\n")
        }
    }
}
