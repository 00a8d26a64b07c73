import BusymateShared
import CaptureStore
import CompressNIO
import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore

@testable import WebFront

/// A group directory with a real capture store, and the web front's routes
/// over it (status from a stand-in: no supervisor here).
final class WebFixture: @unchecked Sendable {
    let dir = URL(fileURLWithPath: "/tmp/bmweb-\(UInt32.random(in: 0...UInt32.max))")
    let paths: GroupPaths
    let database: CaptureDatabase
    let token = WebToken.generate()
    let app: WebApp
    var traffic: TrafficRepository { TrafficRepository(database: database) }
    let base = Date(timeIntervalSince1970: 1_800_000_000)

    init() throws {
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("bodies"), withIntermediateDirectories: true)
        paths = GroupPaths(root: dir)
        database = try CaptureDatabase(paths: paths)
        app = WebApp(paths: paths, token: token, status: StatusSource { ExchangeJSON.object([("stand_in", ExchangeJSON.bool(true))]) })
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    var cookie: String { "\(WebSession.cookieName)=\(WebSession(token: token).cookieValue)" }

    /// Rows `n` from `first` on, a second apart, on `host`.
    @discardableResult
    func insert(_ count: Int, from first: Int = 0, host: String = "api.example.com", status: Int = 200) throws -> [ExchangeRecord] {
        let rows = (first..<(first + count)).map { i in
            var r = ExchangeRecord(
                startedAt: base.addingTimeInterval(Double(i)), scheme: "https", method: "GET", host: host, port: 443,
                path: "/items/\(i)", url: "https://\(host)/items/\(i)", tlsMode: .mitm)
            r.status = status
            return r
        }
        return try traffic.insert(rows)
    }

    /// One exchange whose response is gzip-compressed JSON with keys out of
    /// order and a number no double holds.
    func insertGzipJSON() throws -> (ExchangeRecord, String) {
        let json = #"{"zebra": 1, "apple": {"b": 2, "a": 1}, "big": 12345678901234567890, "float": 1.50}"#
        var buffer = ByteBuffer(string: json)
        let compressed = try buffer.compress(with: .gzip())
        var r = ExchangeRecord(
            startedAt: base.addingTimeInterval(10_000), scheme: "https", method: "GET", host: "json.example.com", port: 443,
            path: "/data", url: "https://json.example.com/data", tlsMode: .mitm)
        r.status = 200
        r.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/json"), ("Content-Encoding", "gzip")])
        r.responseBody = Data(buffer: compressed)
        r.responseBodySize = compressed.readableBytes
        return (try traffic.insert([r])[0], json)
    }
}
