import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import HummingbirdWSClient
import HummingbirdWebSocket
import Logging
import Synchronization
import WebFront

/// The web page's two costs: a page of the list through the API over the
/// million-row store (the first, and filtered ones), and the time from an
/// exchange ending at the proxy to its row on an open page.
enum WebBench {
    struct Result {
        var rows: Int
        var pages: [(name: String, filter: String, milliseconds: (p50: Double, max: Double), shown: Int)]
        var live: (p50: Double, max: Double, samples: Int)?
    }

    /// Pages of 100 through the routes the page uses, served by Hummingbird
    /// over HTTP on loopback (curl's own time for each request).
    static func pages(group: URL, rows: Int) async throws -> [(
        name: String, filter: String, milliseconds: (p50: Double, max: Double), shown: Int
    )] {
        // A page of 100 (the body search: the first match, as the CLI's row asks).
        let token = WebToken.generate()
        let app = WebApp(paths: GroupPaths(root: group), token: token, status: StatusSource { nil })
        let router = app.router()
        let port = Mutex<Int>(0)
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port ?? 0 } },
            logger: Logger(label: "busymate.bench.web"))
        return try await withThrowingTaskGroup(
            of: [(name: String, filter: String, milliseconds: (p50: Double, max: Double), shown: Int)]?.self
        ) { tasks in
            tasks.addTask {
                try await application.runService(gracefulShutdownSignals: [])
                return nil
            }
            try Wait.until("the web API", seconds: 10) { port.withLock { $0 } != 0 }
            let base = "http://127.0.0.1:\(port.withLock { $0 })"
            var results: [(name: String, filter: String, milliseconds: (p50: Double, max: Double), shown: Int)] = []
            for (name, arguments) in [("first page, no filter", [String]())] + StoreBench.queries.dropFirst() {
                let filter = arguments.last ?? ""
                // As the CLI asks (`--limit 1` for the body search), else a page of 100.
                let limit = arguments.firstIndex(of: "--limit").map { arguments[$0 + 1] } ?? "100"
                var times: [Double] = []
                var shown = 0
                for _ in 0..<11 {
                    let query =
                        filter.isEmpty ? "" : "&filter=" + (filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
                    let (seconds, body) = try curl(["-H", "Authorization: Bearer \(token)", "\(base)/api/exchanges?limit=\(limit)\(query)"])
                    times.append(seconds * 1000)
                    shown =
                        ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["exchanges"].flatMap { ($0 as? [Any])?.count }
                        ?? -1
                }
                times.sort()
                results.append((name, filter, (times[times.count / 2], times[times.count - 1]), shown))
            }
            tasks.cancelAll()
            return results
        }.compactMap { $0 }
    }

    /// curl's `time_total` and the body.
    static func curl(_ arguments: [String]) throws -> (Double, Data) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("busymate-bench-web-\(getpid()).json")
        p.arguments = ["-s", "-o", body.path, "-w", "%{time_total}", "--max-time", "30"] + arguments
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        defer { try? FileManager.default.removeItem(at: body) }
        guard p.terminationStatus == 0, let seconds = Double(text) else {
            throw BenchError("curl \(arguments) failed (\(p.terminationStatus))")
        }
        return (seconds, (try? Data(contentsOf: body)) ?? Data())
    }

    /// A page's WebSocket open on the real web front; each request through
    /// the real tunnel to nginx, one at a time: from curl having the whole
    /// response to the `added` message that carries its row.
    static func live(_ proxy: ProxyUnderTest, origin: NginxOrigin, samples: Int = 50) async throws -> (
        p50: Double, max: Double, samples: Int
    ) {
        guard let group = proxy.group else { throw BenchError("Busymate has no group") }
        var bound: String?
        try Wait.until("Busymate's web front", seconds: 20) {
            bound = (try? StatusSource.request(group))?.web?.bound
            return bound != nil && (try? StatusSource.request(group))?.web?.state == .ready
        }
        guard let bound, let token = WebToken.read(group) else { throw BenchError("no web front to measure") }
        let box = Samples()
        var configuration = WebSocketClientConfiguration()
        configuration.additionalHeaders = [.authorization: "Bearer \(token)"]
        configuration.maxFrameSize = 1 << 20
        try await WebSocketClient.connect(
            url: "ws://\(bound)/api/live", configuration: configuration, logger: Logger(label: "busymate.bench.live")
        ) { inbound, outbound, _ in
            try await outbound.write(.text(#"{"type":"filter","filter":"~u /1k\\?live="}"#))
            // The requests, one at a time; the page's socket is read below.
            let driver = Task {
                defer { Task { try? await outbound.close(.normalClosure, reason: nil) } }
                try await Task.sleep(for: .milliseconds(300))
                for i in 0..<(samples + 5) {
                    _ = try curl(["-x", "http://127.0.0.1:\(proxy.port)", "http://127.0.0.1:\(origin.httpPort)/1k?live=\(i)"])
                    let done = DispatchTime.now().uptimeNanoseconds
                    let deadline = Date().addingTimeInterval(5)
                    while box.arrival("\(i)") == nil && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
                    guard let arrived = box.arrival("\(i)") else { throw BenchError("row \(i) never reached the page") }
                    // The first few warm the path up.
                    if i >= 5 { box.latencies.withLock { $0.append(Double(Int64(arrived) - Int64(done)) / 1e6) } }
                }
            }
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case let .text(text) = message, text.hasPrefix(#"{"type":"added""#) else { continue }
                let now = DispatchTime.now().uptimeNanoseconds
                for marker in text.split(separator: "live=").dropFirst().map({ String($0.prefix { $0.isNumber }) }) {
                    box.arrivals.withLock { $0[marker] = $0[marker] ?? now }
                }
            }
            try await driver.value
        }
        let sorted = box.latencies.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { throw BenchError("no live samples") }
        return (sorted[sorted.count / 2], sorted[sorted.count - 1], sorted.count)
    }
}

/// What the live measurement shares between the socket's reader and the requests.
final class Samples: Sendable {
    let arrivals = Mutex<[String: UInt64]>([:])
    let latencies = Mutex<[Double]>([])

    func arrival(_ marker: String) -> UInt64? { arrivals.withLock { $0[marker] } }
}
