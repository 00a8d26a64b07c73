import BusymateShared
import CaptureStore
import Foundation

/// Target 8: how many exchanges a second the store takes through the
/// tunnel's own write path, and how long `busymate list` takes for its first
/// page over a million rows, with and without a filter.
enum StoreBench {
    struct Result {
        var exchangesPerSecond: Double
        var rows: Int
        /// Each query's arguments and its times (process start to exit).
        var queries: [Query]
        var listMilliseconds: (p50: Double, max: Double) { queries.first?.milliseconds ?? (.nan, .nan) }
    }

    struct Query {
        var name: String
        var arguments: [String]
        var milliseconds: (p50: Double, max: Double)
        var rowsShown: Int
    }

    /// What the store holds besides the 50 busy hosts: a host in one row of
    /// 10,000, one only in the oldest rows, and a word in one body 10,000
    /// rows back from the newest.
    static let rareHost = "rare.example.net"
    static let oldHost = "old.example.org"
    static let needle = "zebrafish"

    static let queries: [(String, [String])] =
        [
            ("no filter", []),
            ("selective host (1 row in 10,000)", [#"~d rare\.example\.net"#]),
            ("host only in the oldest rows", [#"~d old\.example\.org"#]),
            ("unselective host", ["~d example"]),
            ("negation", [#"!~d api1\."#]),
            ("status and method", ["~c 404 & ~m post"]),
            ("body regex over the newest 10,000 rows", ["--limit", "1", "~bs zebra.ish"]),
        ]

    static func run(binaries: URL, in directory: URL, rows total: Int) async throws -> Result {
        let group = directory.appendingPathComponent("store-group")
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        let paths = GroupPaths(root: group)
        let traffic = TrafficRepository(database: try CaptureDatabase(paths: paths))
        // Batches as the tunnel's writer makes them (it commits every 20 ms).
        let batch = 500
        // Retention is part of the commit; here it never has to remove anything.
        let keepAll = TrafficRepository.Retention(maxExchanges: 100_000_000, maxBytes: .max)
        var size: TrafficRepository.Size?
        let started = Date()
        var written = 0
        while written < total {
            let records = (0..<batch).map { record(written + $0, of: total) }
            size = try await traffic.save(records, keeping: keepAll, size: size).size
            written += batch
        }
        let rate = Double(written) / Date().timeIntervalSince(started)
        FileHandle.standardError.write(Data(String(format: "bench: store: %d rows written, %.0f a second\n", written, rate).utf8))
        var queries: [Query] = []
        for (name, arguments) in Self.queries {
            var times: [Double] = []
            var shown = 0
            for _ in 0..<11 {
                let t0 = DispatchTime.now().uptimeNanoseconds
                let p = Process()
                p.executableURL = binaries.appendingPathComponent("busymate")
                p.arguments = ["list", "--group", group.path, "--json"] + arguments
                let out = Pipe()
                p.standardOutput = out
                try p.run()
                let json = out.fileHandleForReading.readDataToEndOfFile()
                p.waitUntilExit()
                guard p.terminationStatus == 0 else { throw BenchError("busymate list \(arguments) failed (\(p.terminationStatus))") }
                times.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
                shown = ((try? JSONSerialization.jsonObject(with: json)) as? [Any])?.count ?? -1
            }
            times.sort()
            queries.append(
                Query(name: name, arguments: arguments, milliseconds: (times[times.count / 2], times[times.count - 1]), rowsShown: shown))
        }
        return Result(exchangesPerSecond: rate, rows: written, queries: queries)
    }

    /// A realistic row: headers both ways, a small inline body, timings.
    private static func record(_ i: Int, of total: Int) -> ExchangeRecord {
        let host = i < 200 ? oldHost : i % 10_000 == 5_000 ? rareHost : "api\(i % 50).example.com"
        let start = Date(timeIntervalSince1970: 1_800_000_000 + Double(i) / 1000)
        var r = ExchangeRecord(
            startedAt: start, scheme: "https", method: i % 5 == 0 ? "POST" : "GET", host: host, port: 443,
            path: "/v1/items/\(i)?page=\(i % 7)", url: "https://\(host)/v1/items/\(i)?page=\(i % 7)", tlsMode: .mitm)
        r.connectedAt = start.addingTimeInterval(0.002)
        r.firstByteAt = start.addingTimeInterval(0.010)
        r.endedAt = start.addingTimeInterval(0.012)
        r.clientAddress = "127.0.0.1:\(40000 + i % 20000)"
        r.serverAddress = "93.184.216.34:443"
        r.httpVersion = "HTTP/1.1"
        r.status = i % 13 == 0 ? 404 : 200
        r.reason = i % 13 == 0 ? "Not Found" : "OK"
        r.requestHeaders = ExchangeRecord.encodeHeaders([("Host", host), ("User-Agent", "bench/1.0"), ("Accept", "application/json")])
        r.responseHeaders = ExchangeRecord.encodeHeaders([
            ("Content-Type", "application/json"), ("Content-Length", "64"), ("Server", "nginx"),
        ])
        let name = i == total - 10_000 ? needle : "item \(i)"
        r.responseBody = Data(#"{"id":\#(i),"name":"\#(name)","tags":["a","b"],"ok":true}"#.utf8)
        r.responseBodySize = r.responseBody?.count ?? 0
        r.responseBodyDecodedSize = r.responseBodySize
        r.storedBytes = r.responseBodySize
        r.sni = host
        r.tlsVersion = "TLSv1.3"
        r.tlsCipher = "TLS_AES_128_GCM_SHA256"
        return r
    }
}
