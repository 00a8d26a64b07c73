import BusymateShared
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real `busymate-app` (which starts a real `busymate-tunnel`) on its own
/// group directory under /tmp, proxying on an ephemeral loopback port.
final class Appliance: @unchecked Sendable {
    let base: URL
    let group: URL
    let logURL: URL
    private(set) var supervisor: Process?
    /// Run in a network namespace of its own with only loopback up (root
    /// only): names do not resolve there, and nothing leaves the machine.
    let isolatedNetwork: Bool
    /// Added to `busymate-app`'s command line (as the unit's `ExecStart=` would).
    var supervisorArguments: [String] = []
    /// Run in front of `busymate-app` (e.g. `prlimit --nofile=256:256 --`);
    /// it must exec, so the pid stays the supervisor's.
    var launchPrefix: [String] = []

    static let defaultSettings = """
        {
          "log_level": "debug",
          "proxy": { "listen": ["127.0.0.1:0"] },
          "web": { "listen": "127.0.0.1:0" },
          "tunnel": { "drain_seconds": 2 }
        }

        """

    init(settings: String? = defaultSettings, isolatedNetwork: Bool = false) throws {
        self.isolatedNetwork = isolatedNetwork
        base = URL(fileURLWithPath: "/tmp/bmi-\(UInt32.random(in: 0...UInt32.max))")
        group = base.appendingPathComponent("group")
        logURL = base.appendingPathComponent("supervisor.log")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        chmod(base.path, 0o755)
        if let settings {
            try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
            try Data(Self.webOnAnyPort(settings).utf8).write(to: group.appendingPathComponent("settings.json"))
        }
    }

    /// Settings that say nothing of the web page get it on a port of the
    /// kernel's choosing: tests run side by side, and 9091 may be a real
    /// appliance's. Invalid documents are left as written (their errors
    /// name lines and columns).
    static func webOnAnyPort(_ text: String) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], object["web"] == nil,
            let brace = text.firstIndex(of: "{")
        else { return text }
        return text.replacingCharacters(in: brace...brace, with: #"{"web": {"listen": "127.0.0.1:0"}, "#)
    }

    deinit {
        if let supervisor { kill(supervisor.processIdentifier, SIGKILL) }
        for pid in tunnelPIDs() + webPIDs() { kill(pid, SIGKILL) }
        // BUSYMATE_KEEP_TEST_DIRS=1 keeps the group directory and logs for a post-mortem.
        if ProcessInfo.processInfo.environment["BUSYMATE_KEEP_TEST_DIRS"] == nil {
            try? FileManager.default.removeItem(at: base)
        }
    }

    var settingsURL: URL { group.appendingPathComponent("settings.json") }
    /// The group's CA certificate, for clients that should trust Busymate.
    var caFile: URL { group.appendingPathComponent("ca.pem") }

    /// Writes settings.json, creating the group directory when needed.
    func writeSettings(_ text: String) throws {
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        try Data(Self.webOnAnyPort(text).utf8).write(to: settingsURL)
    }

    /// Puts `origin`'s certificate where the tunnel (another user) can read
    /// it, for `ssl_proxying.upstream_trust` and for clients that pin it.
    func trust(_ origin: Origin) throws -> URL {
        let url = base.appendingPathComponent("origin-\(origin.port).pem")
        try Data((origin.certificatePEM ?? "").utf8).write(to: url)
        chmod(url.path, 0o644)
        return url
    }

    /// Settings that intercept `include`, optionally trusting an origin upstream.
    static func interceptionSettings(include: [String], trust: URL? = nil, insecure: [String] = [], extra: String = "") -> String {
        func list(_ items: [String]) -> String { "[" + items.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        return """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2}\(extra),
             "ssl_proxying": {"include": \(list(include)), "insecure_upstream": \(list(insecure))\(trust.map { ", \"upstream_trust\": \"\($0.path)\"" } ?? "")}}

            """
    }

    /// Starts a supervisor on a group directory that does not exist yet;
    /// once it has written the skeleton, points `proxy.listen` at `listen`
    /// (the default port may be taken on a shared machine).
    func start(patchingDefaultListenTo listen: String) throws {
        try launch()
        try waitUntil("the skeleton is written", timeout: 10) { FileManager.default.fileExists(atPath: settingsURL.path) }
        let text = try String(contentsOf: settingsURL, encoding: .utf8).replacingOccurrences(of: "127.0.0.1:9090", with: listen)
            .replacingOccurrences(of: "127.0.0.1:9091", with: "127.0.0.1:0")
        try AtomicFile.write(Data(text.utf8), to: settingsURL, mode: 0o664)
        try waitUntil("the tunnel is ready", timeout: 15) { (try? self.status())?.string("tunnel.state") == "ready" }
    }

    /// Starts the supervisor and waits until the tunnel is ready.
    func start() throws {
        try launch()
        try waitUntil("the tunnel is ready", timeout: 15) { (try? self.status())?.string("tunnel.state") == "ready" }
    }

    private func launch() throws {
        _ = FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let process = Process()
        if isolatedNetwork {
            // unshare and sh exec: the pid stays the supervisor's.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments =
                [
                    "--net", "--", "/bin/sh", "-c", "ip link set lo up && exec \"$0\" \"$@\"",
                    Command.binary("busymate-app"), "--group", group.path,
                ] + supervisorArguments
        } else if let first = launchPrefix.first {
            process.executableURL = URL(fileURLWithPath: first)
            process.arguments =
                Array(launchPrefix.dropFirst()) + [Command.binary("busymate-app"), "--group", group.path] + supervisorArguments
        } else {
            process.executableURL = URL(fileURLWithPath: Command.binary("busymate-app"))
            process.arguments = ["--group", group.path] + supervisorArguments
        }
        var env = ProcessInfo.processInfo.environment
        env["BUSYMATE_LOG"] = "stderr"
        env.removeValue(forKey: "NOTIFY_SOCKET")
        process.environment = env
        let log = try FileHandle(forWritingTo: logURL)
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        try process.runSerialized()
        supervisor = process
    }

    /// A started appliance intercepting `localhost` and trusting `origin` upstream.
    static func intercepting(_ origin: Origin) throws -> Appliance {
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(interceptionSettings(include: ["localhost"], trust: try appliance.trust(origin)))
        try appliance.start()
        return appliance
    }

    /// Settings for tests of pinning: `localhost` and 127.0.0.1 intercepted
    /// (the second only to show a client trusts our CA for another host),
    /// and loopback clients allowed to pin (`ssl_proxying.pin_loopback`).
    static func pinningSettings(trust: URL, extra: String = "") -> String {
        interceptionSettings(include: ["localhost", "127.0.0.1"], trust: trust, insecure: ["127.0.0.1"], extra: extra)
            .replacingOccurrences(of: #""ssl_proxying": {"#, with: #""ssl_proxying": {"pin_loopback": true, "#)
    }

    /// A started appliance with `pinningSettings`.
    static func pinning(_ origin: Origin) throws -> Appliance {
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(pinningSettings(trust: try appliance.trust(origin)))
        try appliance.start()
        return appliance
    }

    /// A loopback client that trusts our CA completes an intercepted
    /// handshake with another host (127.0.0.1): the evidence that makes
    /// its refusals of `localhost` count as pinning.
    func trustUsElsewhere(_ origin: Origin) throws {
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--cacert", caFile.path,
                "-x", "http://127.0.0.1:\(try proxyPort)", "https://127.0.0.1:\(origin.port)/elsewhere",
            ])
        guard r.status == 0 else { throw Failure("an intercepted handshake with 127.0.0.1 failed: \(r.stderr)") }
    }

    /// `busymate list --json` (newest first).
    func rows() throws -> [[String: Any]] {
        let r = try cli(["list", "--json", "--limit", "1000"])
        guard r.status == 0, let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] else {
            throw Failure("busymate list --json failed (\(r.status)): \(r.stderr)")
        }
        return rows
    }

    /// Waits until `list` shows rows that satisfy `condition`; returns them.
    func rows(_ what: String, timeout: Double = 3, until condition: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
        var found: [[String: Any]] = []
        try waitUntil(what, timeout: timeout) {
            found = try rows()
            return condition(found)
        }
        return found
    }

    /// `busymate show --json ID`: the whole exchange (docs/usage.md, "JSON output").
    func row(_ id: Any?) throws -> [String: Any] {
        let r = try cli(["show", "--json", "\(id as? Int ?? 0)"])
        guard r.status == 0, let row = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] else {
            throw Failure("busymate show --json failed (\(r.status)): \(r.stderr)")
        }
        return row
    }

    /// curl through the proxy, from inside the appliance's network namespace
    /// when it has one.
    func curl(_ url: String, extra: [String] = []) throws -> (code: Int, body: String, result: CommandResult) {
        let port = try proxyPort
        let args = ["-sS", "--max-time", "10", "-x", "http://127.0.0.1:\(port)", "-w", "\n%{http_code}", url] + extra
        let r =
            isolatedNetwork
            ? try Command.run(
                "/usr/bin/nsenter", ["--net=/proc/\(supervisor?.processIdentifier ?? 0)/ns/net", "--", "/usr/bin/curl"] + args)
            : try Command.run("/usr/bin/curl", args)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"), r)
    }

    func killSupervisor() {
        guard let supervisor else { return }
        kill(supervisor.processIdentifier, SIGKILL)
        supervisor.waitForExit()
        self.supervisor = nil
    }

    /// SIGTERM, as systemd stops it; returns the exit status.
    @discardableResult
    func stop() -> Int32? {
        guard let supervisor else { return nil }
        kill(supervisor.processIdentifier, SIGTERM)
        supervisor.waitForExit()
        self.supervisor = nil
        return supervisor.terminationStatus
    }

    @discardableResult
    func cli(_ arguments: [String]) throws -> CommandResult {
        try Command.run(Command.binary("busymate"), arguments + ["--group", group.path])
    }

    /// `busymate status --json`, whatever its exit status says (0 well, 1 a
    /// problem, 3 no supervisor: a test of its own checks those).
    func status() throws -> JSONObject {
        let r = try cli(["status", "--json"])
        guard [0, 1, 3].contains(r.status), let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        else {
            throw Failure("busymate status --json failed (\(r.status)): \(r.stderr)")
        }
        return JSONObject(object)
    }

    var proxyPort: Int {
        get throws {
            let bound = try status().array("listeners").first?["bound"] as? String ?? ""
            guard let port = bound.split(separator: ":").last.flatMap({ Int($0) }) else { throw Failure("no bound listener in status") }
            return port
        }
    }

    var log: String { (try? String(contentsOf: logURL, encoding: .utf8)) ?? "" }

    /// Every running busymate-tunnel serving this group directory.
    func tunnelPIDs() -> [Int32] { childPIDs("busymate-tunnel") }

    /// Every running busymate-web serving this group directory.
    func webPIDs() -> [Int32] { childPIDs("busymate-web") }

    private func childPIDs(_ name: String) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let cmdline = String(decoding: data, as: UTF8.self)
            return cmdline.contains(name) && cmdline.contains(group.path) && !ProcessProbe.isZombieOrGone(pid)
        }
    }

    /// Where the web front listens (its bound address, from `status`).
    var webBase: String {
        get throws {
            guard let bound = try status().string("web.bound") else { throw Failure("no bound web listener in status") }
            return "http://\(bound)"
        }
    }
}

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Polls `condition` every 50 ms until it holds or `timeout` passes.
func waitUntil(_ what: String, timeout: Double, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if (try? condition()) == true { return }
        usleep(50_000)
    }
    if try condition() { return }
    throw Failure("timed out after \(timeout)s waiting until \(what)")
}

/// Dotted-path access into `busymate status --json`.
struct JSONObject {
    let raw: [String: Any]
    init(_ raw: [String: Any]) { self.raw = raw }

    func value(_ path: String) -> Any? {
        var current: Any? = raw
        for key in path.split(separator: ".") { current = (current as? [String: Any])?[String(key)] }
        return current
    }

    func string(_ path: String) -> String? { value(path) as? String }
    func int(_ path: String) -> Int? { value(path) as? Int }
    func bool(_ path: String) -> Bool? { value(path) as? Bool }
    func isNull(_ path: String) -> Bool { value(path) is NSNull }
    func array(_ path: String) -> [[String: Any]] { value(path) as? [[String: Any]] ?? [] }
}

extension Dictionary where Key == String, Value == Any {
    /// A value in nested objects: `row.at("response", "body", "size")`.
    func at(_ path: String...) -> Any? {
        var value: Any? = self
        for key in path { value = (value as? [String: Any])?[key] }
        return value
    }

    /// `show --json`'s headers of `side` (`request` or `response`) as `Name: value` lines.
    func headerLines(_ side: String) -> [String] {
        (at(side, "headers") as? [[String]] ?? []).map { $0.joined(separator: ": ") }
    }
}
