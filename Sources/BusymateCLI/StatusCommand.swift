import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the readiness card: processes, listeners, CA, settings, pinned hosts, counters.",
        discussion: """
            Exit status, for health checks: 0 when all is well, 1 when something is wrong (the tunnel not ready, settings \
            invalid, a listener that failed, the store or the CA unusable: each is listed under "problems"), 3 when the \
            supervisor is not running (as `systemctl is-active`).
            """)

    @OptionGroup var options: GroupOption
    @Flag(name: .long, help: "Print one JSON object.") var json = false

    func run() async throws {
        let paths = options.paths
        var report: StatusReport
        do {
            guard let r = try ControlClient.request(ControlMessage(.status), paths: paths).report else {
                throw CLIError(description: "no report")
            }
            report = r
        } catch let error as CLIError where error.description.hasPrefix("the supervisor is not running") {
            report = StatusReport.offline(paths)
        }
        // Only a store the tunnel has opened (and so created): opening one it
        // is creating raced its first statements under load.
        report.devices = DeviceRows.read(paths, counting: report.tunnel.store == "ok")
        let pinned = report.tunnel.store == "ok" ? Self.pinned(paths) : []
        let settings = SettingsFile.read(paths.settings).settings
        let problems = report.problems
        let open = OpenExchangesFile.read(paths)
        if json {
            // The report as the supervisor gives it, and what the CLI adds.
            let encoded = try StatusCoding.encoder.encode(report)
            guard case let .object(members) = try JSONParser.parse(Array(encoded)).value else {
                throw CLIError(description: "cannot encode the status")
            }
            let added: [ExchangeJSON.Member] = [
                ("ssl_proxying_empty", ExchangeJSON.bool(settings?.sslInclude.isEmpty == true)),
                (
                    "pinned",
                    ExchangeJSON.array(
                        pinned.map {
                            ExchangeJSON.object([
                                ("host", ExchangeJSON.string($0.host)), ("count", ExchangeJSON.number($0.count)),
                                ("last_seen", ExchangeJSON.date($0.lastSeen)), ("reason", ExchangeJSON.string($0.reason)),
                            ])
                        })
                ),
                ("in_flight", ExchangeJSON.number(open?.count ?? 0)),
                ("problems", ExchangeJSON.array(problems.map { ExchangeJSON.string($0) })),
            ]
            ExchangeJSON.write(JSONNode(.object(members + added)))
        } else {
            var lines = [Self.render(report)]
            if settings?.sslInclude.isEmpty == true {
                lines.append(
                    "  SSL proxying the list is empty: HTTPS is passed through undecrypted (busymate ssl-proxying add '*.example.com')")
            }
            if !pinned.isEmpty {
                let names = pinned.prefix(5).map(\.host).joined(separator: ", ") + (pinned.count > 5 ? ", …" : "")
                lines.append(
                    "  pinned       \(pinned.count) host\(pinned.count == 1 ? "" : "s") passed through after refusing our certificate: \(names) (busymate pinned list)"
                )
            }
            if let open, let oldest = open.entries.first {
                lines.append(
                    String(
                        format: "  in flight    %d exchange%@, the oldest open %.1f s: %@ %@ (busymate list)", open.count,
                        open.count == 1 ? "" : "s",
                        Date().timeIntervalSince(oldest.startedAt), oldest.method, oldest.url))
            }
            if !problems.isEmpty { lines.append("problems: " + problems.joined(separator: "; ")) }
            if !report.supervisor.running {
                lines.append("hint: no supervisor serves this group. \(options.hint); or start one: busymate-app --group DIR (make run)")
            }
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        if !report.supervisor.running { throw ExitCode(3) }
        if !problems.isEmpty { throw ExitCode(1) }
    }

    /// Pinned hosts in force (not expired) from the store, when it can be read.
    static func pinned(_ paths: GroupPaths) -> [PinnedDomain] {
        guard FileManager.default.fileExists(atPath: paths.captureDatabase.path),
            let database = try? CaptureDatabase(paths: paths, readOnly: true, owner: false)
        else { return [] }
        let ttl = SettingsFile.read(paths.settings).settings?.pinTTL ?? AppSettings().pinTTL
        return ((try? PinnedDomainRepository(database: database).all()) ?? []).filter { $0.lastSeen.addingTimeInterval(ttl) > Date() }
    }

    static func render(_ r: StatusReport) -> String {
        func mark(_ ok: Bool) -> String { ok ? "✓" : "✗" }
        var lines: [String] = []
        lines.append("Busymate · \(r.mode) mode · group \(r.group)")
        if r.supervisor.running, let pid = r.supervisor.pid {
            var line = "\(mark(true)) supervisor   pid \(pid), up \(duration(r.supervisor.uptimeSeconds ?? 0))"
            if let version = r.supervisor.version {
                line += ", version \(version)"
                // After an upgrade the running daemons may still be the old ones.
                if version != BusymateVersion.full { line += " (this busymate: \(BusymateVersion.full))" }
            }
            lines.append(line)
        } else {
            lines.append("\(mark(false)) supervisor   not running")
        }
        var tunnel = "tunnel       \(r.tunnel.state.rawValue)"
        if let pid = r.tunnel.pid { tunnel += ", pid \(pid)" }
        if let uid = r.tunnel.uid { tunnel += ", uid \(uid)" }
        if r.tunnel.adopted { tunnel += ", adopted" }
        if r.tunnel.restarts > 0 { tunnel += ", \(r.tunnel.restarts) restart\(r.tunnel.restarts == 1 ? "" : "s")" }
        lines.append("\(mark(r.tunnel.state == .ready)) \(tunnel)")
        if let next = r.tunnel.replacement {
            var line = "replacement  pid \(next.pid) \(next.state.rawValue) for \(duration(Date().timeIntervalSince(next.startedAt)))"
            if let left = next.killInSeconds { line += ", not attached (killed in \(Int(left.rounded(.up))) s unless it attaches)" }
            lines.append("\(mark(false)) \(line)")
        }
        if r.tunnel.crashLoop { lines.append("  crash loop: last exit \(r.tunnel.lastExit ?? "?")") }
        if let privileges = r.tunnel.privileges { lines.append("               \(privileges)") }
        if let error = r.tunnel.lastError { lines.append("\(mark(false)) tunnel error \(error)") }
        if let interception = r.tunnel.interception {
            lines.append("\(mark(interception == "on")) HTTPS        interception \(interception)")
        }
        if let store = r.tunnel.store {
            lines.append("\(mark(store == "ok")) capture      \(store == "ok" ? "store ok" : store)")
        }
        if let web = r.web {
            var line = "web          \(web.state.rawValue)"
            if let pid = web.pid { line += ", pid \(pid)" }
            if web.adopted { line += ", adopted" }
            if web.restarts > 0 { line += ", \(web.restarts) restart\(web.restarts == 1 ? "" : "s")" }
            if let bound = web.bound { line += ", \(Web.URLCommand.base(bound)) (busymate web url)" }
            if let error = web.error { line += " (cannot listen on \(web.listen): \(error))" }
            lines.append("\(mark(web.state == .ready || web.state == .stopped)) \(line)")
        }
        if let onboarding = r.web?.onboarding {
            let ok = onboarding.bound != nil && onboarding.error == nil
            lines.append(
                "\(mark(ok)) onboarding   \(onboarding.bound.map { "http://\($0)/ (/proxy.pac, /ca.pem, /ca.der)" } ?? onboarding.listen)\(onboarding.error.map { " (cannot listen: \($0))" } ?? "")"
            )
            if let warning = onboarding.warning { lines.append("⚠ onboarding   \(warning)") }
        }
        if let cloud = r.cloud, cloud.state != "not paired" || !cloud.sinks.isEmpty {
            var line = "cloud        \(cloud.detail)"
            if let name = cloud.name, let api = cloud.api { line += " · \"\(name)\" on \(api)" }
            lines.append("\(mark(cloud.state == "paired" && !cloud.expiringSoon)) \(line)")
            for sink in cloud.sinks { lines.append("               " + CloudStatus.sinkLine(sink)) }
        }
        for l in r.listeners {
            lines.append(
                "\(mark(l.error == nil && l.bound != nil)) listener     \(l.address)\(l.bound.map { $0 != l.address ? " → \($0)" : "" } ?? "")\(l.error.map { " (\($0))" } ?? "")"
            )
        }
        if let network = r.network {
            var line = "network      mode \(network.mode) · live \(network.liveMode)\(network.bothSeen ? " (proxy clients too)" : "")"
            if network.mode == "transparent" || network.rules != "off" { line += " · rules \(network.rules)" }
            if network.quicRejected > 0 { line += " · \(network.quicRejected) QUIC rejected" }
            if network.dnsQueries > 0 { line += " · \(network.dnsQueries) DNS queries" }
            if network.refused > 0 { line += " · \(network.refused) refused (not in access.allow)" }
            lines.append("\(mark(!network.rules.hasPrefix("error"))) \(line)")
            for warning in network.warnings { lines.append("⚠ exposed      \(warning)") }
        }
        for device in r.devices ?? [] {
            // Seed 004's readiness card, per device.
            var steps = [device.named ? (device.port.map { "port \($0)" } ?? "by address") : "seen"]
            if let enrolment = device.enrolment {
                steps.append(device.enrolledAt != nil && enrolment.hasPrefix("enrolled") ? "enrolled" : enrolment)
            }
            if device.admittedUntil != nil { steps.append("admitted") }
            steps.append(device.pacFetches > 0 ? "PAC fetched" : "no PAC fetched")
            steps.append(device.caDownloads > 0 ? "CA downloaded" : "CA not downloaded")
            steps.append(device.caTrustedAt != nil ? "CA trusted" : "CA not trusted yet")
            steps.append(device.lastSeen != nil ? "traffic seen (\(device.source ?? "?"))" : "no traffic yet")
            steps.append(device.online ? "online" : "offline")
            lines.append(
                "\(mark(device.online)) device       \(device.name)\(device.address.map { $0 != device.name ? " (\($0))" : "" } ?? ""): \(steps.joined(separator: " · "))"
            )
        }
        lines.append(
            "\(mark(r.ca.present && r.ca.error == nil)) CA           \(r.ca.present ? "present" : "missing")\(r.ca.error.map { " (\($0))" } ?? "")"
        )
        // This machine's own store; a device's trust is on its line (seen in its handshakes).
        lines.append(
            "\(mark(r.ca.trusted)) CA trust     this machine: \(r.ca.trusted ? "in its system trust store" : "not in its system trust store") (devices: on their lines)"
        )
        if let error = r.settings.error {
            lines.append("\(mark(false)) settings     invalid: \(error) (last good settings stay in force)")
        } else {
            lines.append("\(mark(true)) settings     valid")
        }
        let c = r.counters
        lines.append(
            "  traffic      \(c.connectionsActive) open / \(c.connectionsTotal) connections, \(c.requestsTotal) requests, \(bytes(c.bytesFromClients)) in, \(bytes(c.bytesToClients)) out"
        )
        if let held = c.breakpointsHeld, held > 0 { lines.append("  breakpoints  \(held) held (busymate breakpoints list)") }
        if let idle = c.tunnelsIdleClosed, idle > 0 { lines.append("  tunnels      \(idle) closed idle (timeouts.tunnel_idle_seconds)") }
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
