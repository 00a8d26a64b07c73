import Foundation

/// A real browser's page load: headless Chromium loads the origin's page
/// of 140 resources over HTTPS from nginx's HTTP/2 port, direct and through
/// each proxy (intercepted), each load in a fresh browser: no cache, no
/// connection or session kept. `bench/pageload.py` drives Chromium and
/// measures the navigation's `loadEventEnd`.
enum PageLoadBench {
    struct Result {
        var medianMilliseconds: Double
        var loads: [Double]
        /// What Chromium spoke to the first hop (the origin, or the proxy's interception).
        var protocols: [String]
        var resources: Int
    }

    static let script = "bench/pageload.py"
    static let loads = 7

    /// Writes the page under the origin's root, as `page/`.
    static func makePage(in www: URL) throws {
        _ = try run(["make-page", www.appendingPathComponent("page").path])
    }

    /// The median of `loads` uncached loads; Chromium may use every core.
    static func measure(origin: NginxOrigin, proxyPort: Int?) throws -> Result {
        var arguments = ["load", "--url", "https://localhost:\(origin.http2Port)/page/index.html", "--loads", "\(loads)"]
        if let proxyPort { arguments += ["--proxy", "127.0.0.1:\(proxyPort)"] }
        let text = try run(arguments)
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let median = object["median_ms"] as? Double, let loads = object["loads_ms"] as? [Double]
        else { throw BenchError("pageload.py printed no result: \(text.prefix(300))") }
        return Result(
            medianMilliseconds: median, loads: loads, protocols: object["protocols"] as? [String] ?? [],
            resources: object["resources"] as? Int ?? 0)
    }

    private static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
        process.arguments = ["-c", BenchProcess.everyCore, "python3", script] + arguments
        let out = Pipe()
        // A file, not a pipe: Chromium's chatter could fill a pipe nobody reads while stdout is.
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("busymate-pageload-\(getpid()).log")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errors) }
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let problem = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        guard process.terminationStatus == 0 else {
            throw BenchError("pageload.py \(arguments.first ?? "") failed (exit \(process.terminationStatus)): \(problem.suffix(600))")
        }
        return text
    }
}
