import ArgumentParser
import BusymateShared
import Foundation

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the readiness card: processes, listeners, CA, settings, counters.")

    @OptionGroup var options: GroupOption
    @Flag(name: .long, help: "Print one JSON object.") var json = false

    func run() async throws {
        let paths = options.paths
        let report: StatusReport
        do {
            guard let r = try ControlClient.request(ControlMessage(.status), paths: paths).report else { throw CLIError(description: "no report") }
            report = r
        } catch let error as CLIError where error.description.hasPrefix("the supervisor is not running") {
            report = Self.offlineReport(paths)
        }
        if json {
            FileHandle.standardOutput.write(try StatusCoding.encoder.encode(report) + Data("\n".utf8))
        } else {
            print(Self.render(report))
        }
    }

    /// Without a supervisor: what the files say.
    static func offlineReport(_ paths: GroupPaths) -> StatusReport {
        let tunnel = TunnelStatus.read(paths.status).flatMap { ProcessProbe.isAlive($0.pid) ? $0 : nil }
        let snapshot = SettingsFile.read(paths.settings)
        return StatusReport(
            group: paths.root.path, mode: snapshot.settings?.mode.rawValue ?? "proxy",
            supervisor: .init(running: false, pid: nil, uptimeSeconds: nil, settingsSha256: nil),
            tunnel: .init(pid: tunnel?.pid, uid: tunnel?.uid, state: tunnel?.state ?? .absent, privileges: tunnel?.privileges,
                          settingsSha256: tunnel?.settingsSha256, settingsError: tunnel?.settingsError, startedAt: tunnel?.startedAt,
                          restarts: 0, crashLoop: false, lastExit: nil, nextRestartInSeconds: nil, adopted: false,
                          interception: tunnel?.interception, lastError: tunnel?.lastError, store: tunnel?.store),
            listeners: tunnel?.listeners ?? [],
            ca: .init(present: FileManager.default.fileExists(atPath: paths.caPEM.path), trusted: false, error: nil, subject: nil,
                      fingerprintSha256: nil, notAfter: nil),
            settings: .init(path: paths.settings.path, valid: snapshot.error == nil, error: snapshot.error?.description, unknownKeys: snapshot.unknownKeys),
            counters: tunnel?.counters ?? TrafficCounters())
    }

    static func render(_ r: StatusReport) -> String {
        func mark(_ ok: Bool) -> String { ok ? "✓" : "✗" }
        var lines: [String] = []
        lines.append("Busymate · \(r.mode) mode · group \(r.group)")
        if r.supervisor.running, let pid = r.supervisor.pid {
            lines.append("\(mark(true)) supervisor   pid \(pid), up \(duration(r.supervisor.uptimeSeconds ?? 0))")
        } else {
            lines.append("\(mark(false)) supervisor   not running")
        }
        var tunnel = "tunnel       \(r.tunnel.state.rawValue)"
        if let pid = r.tunnel.pid { tunnel += ", pid \(pid)" }
        if let uid = r.tunnel.uid { tunnel += ", uid \(uid)" }
        if r.tunnel.adopted { tunnel += ", adopted" }
        if r.tunnel.restarts > 0 { tunnel += ", \(r.tunnel.restarts) restart\(r.tunnel.restarts == 1 ? "" : "s")" }
        lines.append("\(mark(r.tunnel.state == .ready)) \(tunnel)")
        if r.tunnel.crashLoop { lines.append("  crash loop: last exit \(r.tunnel.lastExit ?? "?")") }
        if let privileges = r.tunnel.privileges { lines.append("               \(privileges)") }
        if let error = r.tunnel.lastError { lines.append("\(mark(false)) tunnel error \(error)") }
        if let interception = r.tunnel.interception {
            lines.append("\(mark(interception == "on")) HTTPS        interception \(interception)")
        }
        if let store = r.tunnel.store {
            lines.append("\(mark(store == "ok")) capture      \(store == "ok" ? "store ok" : store)")
        }
        for l in r.listeners {
            lines.append("\(mark(l.error == nil && l.bound != nil)) listener     \(l.address)\(l.bound.map { $0 != l.address ? " → \($0)" : "" } ?? "")\(l.error.map { " (\($0))" } ?? "")")
            if let warning = l.warning { lines.append("⚠ open proxy   \(warning)") }
        }
        lines.append("\(mark(r.ca.present && r.ca.error == nil)) CA           \(r.ca.present ? "present" : "missing")\(r.ca.error.map { " (\($0))" } ?? "")")
        lines.append("\(mark(r.ca.trusted)) CA trust     \(r.ca.trusted ? "in the system trust store" : "not in the system trust store")")
        if let error = r.settings.error {
            lines.append("\(mark(false)) settings     invalid: \(error) (last good settings stay in force)")
        } else {
            lines.append("\(mark(true)) settings     valid")
        }
        let c = r.counters
        lines.append("  traffic      \(c.connectionsActive) open / \(c.connectionsTotal) connections, \(c.requestsTotal) requests, \(bytes(c.bytesFromClients)) in, \(bytes(c.bytesToClients)) out")
        if let held = c.breakpointsHeld, held > 0 { lines.append("  breakpoints  \(held) held (busymate breakpoints list)") }
        return lines.joined(separator: "\n")
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds)
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(s % 60)s" }
        return "\(s / 3600)h \(s % 3600 / 60)m"
    }

    static func bytes(_ n: Int) -> String {
        n < 1024 ? "\(n) B" : n < 1 << 20 ? String(format: "%.1f KiB", Double(n) / 1024) : String(format: "%.1f MiB", Double(n) / 1_048_576)
    }
}
