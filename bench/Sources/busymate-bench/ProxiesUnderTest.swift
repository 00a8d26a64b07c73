import BusymateShared
import CaptureStore
import Foundation

/// A proxy the benchmark drives: where it listens and the CA its
/// interception certificates chain to.
struct ProxyUnderTest {
    let name: String
    let port: Int
    let caCertificate: URL
    let process: BenchProcess
    /// The process whose memory is the proxy's (Busymate's tunnel).
    let dataPathPID: Int32
    /// Busymate's group, whose store the bench can count.
    var group: GroupPaths?

    func rowsStored() -> Int? {
        guard let group, let database = try? CaptureDatabase(paths: group, readOnly: true) else { return nil }
        return try? TrafficRepository(database: database).count()
    }

    func messagesStored() -> Int? {
        guard let group, let database = try? CaptureDatabase(paths: group, readOnly: true) else { return nil }
        return try? WebSocketRepository(database: database).messageCount()
    }
}

enum Busymate {
    /// `extra`: more top-level keys, each after a comma.
    static func settings(origin: NginxOrigin, extra: String = "") -> String {
        """
        {"log_level": "warning", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 1},
         "ssl_proxying": {"include": ["localhost"], "upstream_trust": "\(origin.certificate.path)"}\(extra)}

        """
    }

    /// The release supervisor on a group of its own, capture on (the
    /// default), intercepting `localhost`, trusting the origin upstream.
    static func start(binaries: URL, in directory: URL, core: Int, origin: NginxOrigin) throws -> ProxyUnderTest {
        try start(binaries: binaries, in: directory, cores: "\(core)", origin: origin)
    }

    /// On `cores`: the tunnel runs an event loop per core it may use.
    static func start(binaries: URL, in directory: URL, cores: String, origin: NginxOrigin) throws -> ProxyUnderTest {
        let group = directory.appendingPathComponent("group")
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        try Data(settings(origin: origin).utf8).write(to: group.appendingPathComponent("settings.json"))
        let process = try BenchProcess(
            "busymate", cores: cores, executable: binaries.appendingPathComponent("busymate-app").path,
            arguments: ["--group", group.path], environment: ["BUSYMATE_LOG": "stderr"], logDirectory: directory)
        let paths = GroupPaths(root: group)
        var status: TunnelStatus?
        do {
            try Wait.until("Busymate's tunnel", seconds: 20) {
                status = TunnelStatus.read(paths.status)
                return status?.state == .ready && status?.listeners.first?.bound != nil
            }
        } catch {
            process.stop()
            throw BenchError("Busymate's tunnel was not ready in 20 s:\n\(process.tail())")
        }
        guard let status, let bound = status.listeners.first?.bound, let port = Int(bound.split(separator: ":").last ?? "") else {
            process.stop()
            throw BenchError("Busymate did not say where it listens:\n\(process.tail())")
        }
        return ProxyUnderTest(
            name: "Busymate", port: port, caCertificate: paths.caPEM, process: process, dataPathPID: status.pid, group: paths)
    }
}

enum Mitmdump {
    /// mitmdump 12.3.1 writing every flow to a file (capture on, as for
    /// Busymate), verifying the origin against its certificate, and passing
    /// 127.0.0.2 through untouched (as Busymate does, not being listed).
    static func start(executable: String, in directory: URL, core: Int, origin: NginxOrigin) throws -> ProxyUnderTest {
        try start(executable: executable, in: directory, cores: "\(core)", origin: origin)
    }

    static func start(executable: String, in directory: URL, cores: String, origin: NginxOrigin) throws -> ProxyUnderTest {
        let confdir = directory.appendingPathComponent("mitmproxy")
        try FileManager.default.createDirectory(at: confdir, withIntermediateDirectories: true)
        let port = try Wait.freePort()
        let process = try BenchProcess(
            "mitmdump", cores: cores, executable: executable,
            arguments: [
                "--quiet", "--listen-host", "127.0.0.1", "--listen-port", "\(port)",
                "--set", "confdir=\(confdir.path)",
                "--set", "ssl_verify_upstream_trusted_ca=\(origin.certificate.path)",
                "--set", "ignore_hosts=^127\\.0\\.0\\.2:",
                "--save-stream-file", directory.appendingPathComponent("flows.mitm").path,
            ], logDirectory: directory)
        let ca = confdir.appendingPathComponent("mitmproxy-ca-cert.pem")
        do {
            try Wait.until("mitmdump", seconds: 60) { Wait.accepts(port) && FileManager.default.fileExists(atPath: ca.path) }
        } catch {
            process.stop()
            throw BenchError("mitmdump did not start:\n\(process.tail())")
        }
        return ProxyUnderTest(name: "mitmdump", port: port, caCertificate: ca, process: process, dataPathPID: process.pid)
    }
}
