import CLinux
import Foundation

/// Runs a program to completion and captures its output.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Command {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Where the built daemons and CLI are (`make test` builds them first).
    static var binDir: URL {
        if let dir = ProcessInfo.processInfo.environment["BUSYMATE_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return repoRoot.appendingPathComponent(".build/debug")
    }

    static func binary(_ name: String) -> String { binDir.appendingPathComponent(name).path }

    /// Runs `executable` to its end (or `timeout`, then SIGTERM) and returns
    /// its exit status and output. Spawned with posix_spawn, not Foundation's
    /// `Process`: its `run()` reads /proc/self/fd past the end of a buffer now
    /// and then and crashed the test process (parallel tests keep many
    /// descriptors open). A shell moves the pipes onto stdout and stderr.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Double = 30) throws
        -> CommandResult
    {
        var out: [Int32] = [-1, -1], err: [Int32] = [-1, -1]
        // Close-on-exec, so no other child keeps them (spawned children close what they did not ask for too).
        guard pipe(&out) == 0 else { throw Failure("pipe: errno \(errno)") }
        guard pipe(&err) == 0 else {
            close(out[0])
            close(out[1])
            throw Failure("pipe: errno \(errno)")
        }
        for fd in out + err { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let argv = ["/bin/sh", "-c", #"exec "$0" "$@" 1>&3 2>&4 3>&- 4>&-"#, executable] + arguments
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let pid = withCStrings(argv) { argv in
            withCStrings(env) { envp in
                [out[1], err[1]].withUnsafeBufferPointer { fds in busymate_spawn("/bin/sh", argv, envp, fds.baseAddress, 2) }
            }
        }
        close(out[1])
        close(err[1])
        guard pid > 0 else {
            close(out[0])
            close(err[0])
            throw Failure("cannot start \(executable): errno \(-pid)")
        }
        let (stdout, stderr) = readBoth(out[0], err[0], pid: pid, timeout: timeout)
        close(out[0])
        close(err[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // As Foundation's terminationStatus: the exit code, or the signal that ended it.
        let code = status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
        return CommandResult(status: code, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Reads both pipes to their ends; past `timeout` the program gets SIGTERM,
    /// and 5 s later the reading stops (a child it left may hold the pipes).
    private static func readBoth(_ out: Int32, _ err: Int32, pid: pid_t, timeout: Double) -> (Data, Data) {
        var data = [Data(), Data()]
        var open = [true, true]
        let fds = [out, err]
        let deadline = Date().addingTimeInterval(timeout)
        var killed = false
        var buffer = [UInt8](repeating: 0, count: 65536)
        while open.contains(true) {
            if Date() > deadline {
                if !killed {
                    kill(pid, SIGTERM)
                    killed = true
                } else if Date() > deadline.addingTimeInterval(5) {
                    break
                }
            }
            var polls = (0..<2).filter { open[$0] }.map { pollfd(fd: fds[$0], events: Int16(POLLIN), revents: 0) }
            guard poll(&polls, nfds_t(polls.count), 100) > 0 else { continue }
            for p in polls where p.revents != 0 {
                guard let i = fds.firstIndex(of: p.fd) else { continue }
                let n = buffer.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
                if n > 0 {
                    data[i].append(contentsOf: buffer[0..<n])
                } else if n == 0 || (errno != EINTR && errno != EAGAIN) {
                    open[i] = false
                }
            }
        }
        return (data[0], data[1])
    }

    /// `strings` as a NULL-terminated array of C strings, for `body`.
    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) } + [nil]
        defer { copies.forEach { free($0) } }
        return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    @discardableResult
    static func shell(_ script: String, timeout: Double = 60) throws -> CommandResult {
        try run("/bin/sh", ["-c", script], timeout: timeout)
    }

    /// Starts a program that runs while the test goes on (a client held at a
    /// breakpoint); its output goes to files, so nothing waits on a pipe.
    static func start(_ executable: String, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws
        -> Running
    {
        let running = Running(directory: directory)
        let process = running.process
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        for url in [running.out, running.err] { _ = FileManager.default.createFile(atPath: url.path, contents: nil) }
        process.standardOutput = try FileHandle(forWritingTo: running.out)
        process.standardError = try FileHandle(forWritingTo: running.err)
        process.standardInput = FileHandle.nullDevice
        try process.runSerialized()
        return running
    }

    /// `curl` through the proxy; returns (HTTP code, body) for one URL.
    static func curl(proxyPort: Int, _ url: String, extra: [String] = []) throws -> (code: Int, body: String, result: CommandResult) {
        let r = try run(
            "/usr/bin/curl", ["-sS", "--max-time", "10", "-x", "http://127.0.0.1:\(proxyPort)", "-w", "\n%{http_code}", url] + extra)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let code = Int(lines.last ?? "") ?? 0
        return (code, lines.dropLast().joined(separator: "\n"), r)
    }
}

/// A program started with `Command.start`.
final class Running: @unchecked Sendable {
    let process = Process()
    let out: URL
    let err: URL

    init(directory: URL) {
        let name = "run-\(UInt32.random(in: 0...UInt32.max))"
        out = directory.appendingPathComponent("\(name).out")
        err = directory.appendingPathComponent("\(name).err")
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    var isRunning: Bool { process.isRunning }
    var stdout: String { (try? String(contentsOf: out, encoding: .utf8)) ?? "" }

    /// Waits for it to exit (killing it after `timeout`) and returns what it printed.
    func finish(timeout: Double = 15) throws -> CommandResult {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
            throw Failure("\(process.executableURL?.lastPathComponent ?? "?") did not finish within \(timeout) s; it printed: \(stdout)")
        }
        process.waitForExit()
        return CommandResult(
            status: process.terminationStatus, stdout: stdout, stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }
}
