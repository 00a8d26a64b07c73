import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A process of the benchmark's (origin, proxy), pinned to a core with
/// taskset, its output in a log file; killed with its process group.
final class BenchProcess: @unchecked Sendable {
    let name: String
    let process = Process()
    let log: URL

    convenience init(
        _ name: String, core: Int?, executable: String, arguments: [String], environment: [String: String] = [:], logDirectory: URL
    ) throws {
        try self.init(
            name, cores: core.map(String.init), executable: executable, arguments: arguments, environment: environment,
            logDirectory: logDirectory)
    }

    /// `cores`: a taskset list ("0", "0-1"); nil leaves the affinity this process has.
    init(_ name: String, cores: String?, executable: String, arguments: [String], environment: [String: String] = [:], logDirectory: URL)
        throws
    {
        self.name = name
        log = logDirectory.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        if let cores {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            process.arguments = ["-c", cores, executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Moves the process and all its threads to `core`.
    func pin(to core: Int) throws { try Self.pin(pid, to: "\(core)", name: name) }

    /// Moves `pid` and all its threads to `cores` (a taskset list).
    static func pin(_ pid: Int32, to cores: String, name: String) throws {
        let taskset = Process()
        taskset.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
        taskset.arguments = ["-a", "-p", "-c", cores, "\(pid)"]
        taskset.standardOutput = FileHandle.nullDevice
        try taskset.run()
        taskset.waitUntilExit()
        guard taskset.terminationStatus == 0 else { throw BenchError("taskset could not move \(name) to cores \(cores)") }
    }

    /// Every core this machine has, as taskset writes it.
    static var everyCore: String { "0-\(ProcessInfo.processInfo.processorCount - 1)" }

    func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    func tail() -> String {
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(15).joined(separator: "\n")
    }
}

enum Wait {
    /// Polls `condition` every 50 ms until it holds or `seconds` pass.
    static func until(_ what: String, seconds: Double, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return }
            usleep(50_000)
        }
        throw BenchError("timed out waiting for \(what)")
    }

    /// True once something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    /// A port nothing listens on now (bind to 0, read it, let it go).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw BenchError("bind: \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
