import Foundation

/// nghttp2's `h2load` against the origin directly (it speaks to no proxy):
/// the same connections, streams and URL as an HTTP/2 cell, a check that
/// this generator's direct figure is what an established tool measures.
enum H2Load {
    struct Result {
        var perSecond: Double
        var succeeded: Int
        var failed: Int
        /// What ALPN agreed on: h2load falls back to HTTP/1.1 when the server offers no h2.
        var applicationProtocol: String
    }

    static var executable: String? {
        ["/usr/bin/h2load", "/usr/local/bin/h2load"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs on this process's core (the generator's); nil when h2load is missing.
    static func run(_ plan: LoadPlan, seconds: Double) throws -> Result? {
        guard let executable else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "-c", "\(plan.connections)", "-m", "\(plan.streams)", "-t", "1",
            "-D", "\(Int((seconds * 1000).rounded()))ms", "--warm-up-time", "1",
            "-H", "user-agent: busymate-bench", "https://\(plan.host):\(plan.port)\(plan.path)",
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0, let parsed = parse(text) else {
            throw BenchError("h2load failed (exit \(process.terminationStatus)):\n\(text.suffix(600))")
        }
        return parsed
    }

    /// From "finished in 5.00s, 12345.60 req/s, …" and
    /// "requests: N total, N started, N done, N succeeded, N failed, …".
    static func parse(_ text: String) -> Result? {
        func number(after label: String, in line: Substring) -> Double? {
            let words = line.replacingOccurrences(of: ",", with: "").split(separator: " ")
            guard let index = words.firstIndex(of: Substring(label)), index > 0 else { return nil }
            return Double(words[index - 1])
        }
        let lines = text.split(separator: "\n")
        guard let finished = lines.first(where: { $0.hasPrefix("finished in") }),
            let requests = lines.first(where: { $0.hasPrefix("requests:") }),
            let rate = number(after: "req/s", in: finished)
        else { return nil }
        let agreed = lines.first { $0.hasPrefix("Application protocol:") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces)
        return Result(
            perSecond: rate, succeeded: Int(number(after: "succeeded", in: requests) ?? 0),
            failed: Int(number(after: "failed", in: requests) ?? 0), applicationProtocol: agreed ?? "unknown")
    }
}
