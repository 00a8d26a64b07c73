import Foundation

/// Runs a program to completion and captures its output.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Command {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Where the built daemons and CLI are (`make test` builds them first).
    static var binDir: URL {
        if let dir = ProcessInfo.processInfo.environment["BUSYMATE_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return repoRoot.appendingPathComponent(".build/debug")
    }

    static func binary(_ name: String) -> String { binDir.appendingPathComponent(name).path }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Double = 30) throws -> CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.runSerialized()
        let deadline = DispatchTime.now() + timeout
        let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: deadline, execute: killer)
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitForExit()
        killer.cancel()
        return CommandResult(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    @discardableResult
    static func shell(_ script: String, timeout: Double = 60) throws -> CommandResult {
        try run("/bin/sh", ["-c", script], timeout: timeout)
    }

    /// Starts a program that runs while the test goes on (a client held at a
    /// breakpoint); its output goes to files, so nothing waits on a pipe.
    static func start(_ executable: String, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws -> Running {
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
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "-x", "http://127.0.0.1:\(proxyPort)", "-w", "\n%{http_code}", url] + extra)
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
        return CommandResult(status: process.terminationStatus, stdout: stdout, stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }
}
