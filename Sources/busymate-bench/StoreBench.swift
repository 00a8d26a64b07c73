import BusymateShared
import CaptureStore
import Foundation

/// Target 8: how many exchanges a second the store takes through the
/// tunnel's own write path, and how long `busymate list` takes for its first
/// page over a million rows.
enum StoreBench {
    struct Result {
        var exchangesPerSecond: Double
        var rows: Int
        var listMilliseconds: (p50: Double, max: Double)
    }

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
            let records = (0..<batch).map { record(written + $0) }
            size = try await traffic.save(records, keeping: keepAll, size: size).size
            written += batch
        }
        let rate = Double(written) / Date().timeIntervalSince(started)
        var times: [Double] = []
        for _ in 0..<11 {
            let t0 = DispatchTime.now().uptimeNanoseconds
            let p = Process()
            p.executableURL = binaries.appendingPathComponent("busymate")
            p.arguments = ["list", "--group", group.path]
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw BenchError("busymate list failed (\(p.terminationStatus))") }
            times.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
        }
        times.sort()
        return Result(exchangesPerSecond: rate, rows: written, listMilliseconds: (times[times.count / 2], times[times.count - 1]))
    }

    /// A realistic row: headers both ways, a small inline body, timings.
    private static func record(_ i: Int) -> ExchangeRecord {
        let host = "api\(i % 50).example.com"
        let start = Date(timeIntervalSince1970: 1_800_000_000 + Double(i) / 1000)
        var r = ExchangeRecord(startedAt: start, scheme: "https", method: i % 5 == 0 ? "POST" : "GET", host: host, port: 443,
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
        r.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/json"), ("Content-Length", "64"), ("Server", "nginx")])
        r.responseBody = Data(#"{"id":\#(i),"name":"item \#(i)","tags":["a","b"],"ok":true}"#.utf8)
        r.responseBodySize = r.responseBody?.count ?? 0
        r.responseBodyDecodedSize = r.responseBodySize
        r.storedBytes = r.responseBodySize
        r.sni = host
        r.tlsVersion = "TLSv1.3"
        r.tlsCipher = "TLS_AES_128_GCM_SHA256"
        return r
    }
}
