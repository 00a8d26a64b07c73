import BusymateShared
import Foundation

@testable import CaptureStore

/// The store every input's filter runs over: rows made to give each clause
/// something to select and something to refuse (statuses, no response,
/// errors, headers with JSON escapes, bodies inline, in files, gzip and
/// deflate, marks, comments, a CONNECT tunnel, DNS queries, a resent row,
/// a WebSocket 101, plain HTTP, IPv6 addresses, times a millisecond apart,
/// HTTP versions, gRPC content types).
/// Made once, at the first input; its rows read back as the store keeps them.
final class FilterStore: @unchecked Sendable {
    // @unchecked: made once, then only read, on libFuzzer's one thread.
    static let base = Date(timeIntervalSince1970: 1_800_000_000)

    let database: CaptureDatabase
    let bodies: BodyStore
    /// Every row, as the in-memory matcher sees it, by id.
    let subjects: [(id: Int64, subject: FilterSubject)]

    init() throws {
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("fuzz-filter-\(getpid())")
        try? FileManager.default.removeItem(at: dir)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("bodies"), withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "/fuzz-filter-\(getpid())") }
        let paths = GroupPaths(root: dir)
        database = try CaptureDatabase(paths: paths)
        bodies = BodyStore(paths: paths)
        let traffic = TrafficRepository(database: database)
        _ = try traffic.insert(Self.rows())
        // Whole bodies in files; the rows keep only their first bytes.
        try Data("only the first bytes, and further on: haystack-word".utf8).write(to: dir.appendingPathComponent("bodies/big.response"))
        try Data("name=needle&more=in-the-file".utf8).write(to: dir.appendingPathComponent("bodies/upload.request"))
        var all = TrafficRepository.Filter()
        all.limit = 1000
        let bodies = bodies
        subjects = try traffic.list(all).compactMap { row in row.id.map { ($0, FilterSubject(row, bodies: bodies)) } }
    }

    private static func rows() -> [ExchangeRecord] {
        var rows: [ExchangeRecord] = []
        func row(
            _ path: String, host: String = "api.example.com", scheme: String = "https", method: String = "GET", status: Int? = 200,
            seconds: Double, _ edit: (inout ExchangeRecord) -> Void = { _ in }
        ) {
            let port = scheme == "https" ? 443 : 80
            var r = ExchangeRecord(
                startedAt: base.addingTimeInterval(seconds), scheme: scheme, method: method, host: host, port: port,
                path: path, url: "\(scheme)://\(host)\(path)", tlsMode: scheme == "https" ? .mitm : .none)
            r.status = status
            r.requestHeaders = ExchangeRecord.encodeHeaders([("Accept", "*/*"), ("User-Agent", "curl/7.88")])
            r.responseHeaders = status == nil ? nil : ExchangeRecord.encodeHeaders([("Content-Type", "application/json")])
            r.clientAddress = "127.0.0.1:5000"
            r.serverAddress = "93.184.216.34:\(port)"
            r.device = "127.0.0.1"
            r.httpVersion = "HTTP/1.1"
            edit(&r)
            rows.append(r)
        }
        row("/users", seconds: -3600) { $0.responseBody = Data("{\"name\":\"needle\"}".utf8) }
        row("/users/9", method: "POST", status: 404, seconds: -3000) {
            $0.requestHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/x-www-form-urlencoded"), ("X-Trace", "Abc-1")])
            $0.requestBody = Data("name=needle".utf8)
            $0.requestBodyFile = "upload.request"
            $0.marker = "default"
            $0.comment = "login bug, see ticket 42"
            $0.device = "phone"
            $0.httpVersion = "HTTP/1.0"
        }
        row("/img.png", host: "cdn.example.org", status: 503, seconds: -2400) {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "image/png"), ("Set-Cookie", "a=b"), ("set-cookie", "c=d")])
            $0.responseBody = Data([0x89, 0x50, 0x4E, 0x47, 0xFF, 0xFE, 0x00])
        }
        row("/timeout", status: nil, seconds: -1800) { $0.error = "api.example.com:443 sent no response within 120 s" }
        row("/caf%C3%A9?q=a%20b", seconds: -1200) { $0.rule = "mock, headers" }
        row("/bad%zz%", seconds: -1100) { $0.rule = "" }
        row("/big", host: "files.example.net", seconds: -600) {
            $0.responseBodyFile = "big.response"
            $0.responseBody = Data("only the first bytes".utf8)
            $0.resentFrom = "some-request-id"
            $0.marker = "🔥"
        }
        row("/ws", status: 101, seconds: -300) {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "WebSocket"), ("Connection", "Upgrade")])
        }
        row("/ws-no", status: 101, seconds: -299.999) {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "h2c"), ("Connection", "Upgrade")])
        }
        // A Kelvin sign: SQLite's lower() leaves it, Swift's lowercased() makes it a k.
        row("/ws-kelvin", status: 101, seconds: -298) {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "WEBSOC\u{212A}ET"), ("Connection", "Upgrade")])
        }
        row("", host: "pinned.example.com", method: "CONNECT", status: nil, seconds: -60) {
            $0.scheme = "tcp"
            $0.url = "pinned.example.com:443"
            $0.tlsMode = .passthrough
            $0.requestHeaders = "[]"
            $0.bytesUp = 517
            $0.bytesDown = 4096
            $0.httpVersion = nil
        }
        row("", host: "opaque.example.com", method: "CONNECT", status: 200, seconds: -59) {
            $0.scheme = "https"
            $0.url = "opaque.example.com:443"
            $0.responseHeaders = "[]"
        }
        row("/A", host: "example.com", seconds: -30) {
            $0.scheme = "dns"
            $0.method = "DNS"
            $0.port = 53
            $0.url = "dns://example.com/A"
            $0.tlsMode = .none
            $0.requestHeaders = "[]"
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("content-type", "text/plain; charset=utf-8")])
            $0.responseBody = Data("example.com. 300 IN A 93.184.216.34".utf8)
            // A DNS row keeps its transport where HTTP rows keep their version.
            $0.httpVersion = "udp"
            $0.serverAddress = "1.1.1.1:53"
            $0.clientAddress = "[fe80::1%eth0]:5353"
            $0.device = "laptop"
        }
        row("/AAAA", host: "nowhere.invalid", status: nil, seconds: -29) {
            $0.scheme = "dns"
            $0.method = "DNS"
            $0.url = "dns://nowhere.invalid/AAAA"
            $0.tlsMode = .none
            $0.requestHeaders = "[]"
            $0.error = "no answer from 1.1.1.1:53"
            $0.httpVersion = "tcp"
        }
        // HTTP/2 streams of one connection: gRPC calls (any case; a combining mark after the type's
        // last letter; gRPC-Web) and not (a fullwidth letter, a space before, grpc elsewhere in the value).
        row("/grpc/Say", host: "grpc.example.com", method: "POST", seconds: -20) {
            $0.httpVersion = "HTTP/2.0"
            $0.streamID = 1
            $0.connectionID = "c1"
            $0.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "APPLICATION/GRPC+proto"), ("te", "trailers")])
            $0.responseTrailers = ExchangeRecord.encodeHeaders([("grpc-status", "0")])
        }
        row("/grpc/web", host: "grpc.example.com", method: "POST", seconds: -19.5) {
            $0.httpVersion = "HTTP/2.0"
            $0.streamID = 3
            $0.connectionID = "c1"
            $0.requestHeaders = ExchangeRecord.encodeHeaders([
                ("Content-Type", "application/grpc\u{301}-web"), ("content-type", "text/plain"),
            ])
        }
        row("/grpc/not", host: "grpc.example.com", method: "POST", seconds: -19) {
            $0.httpVersion = "HTTP/2"
            $0.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "\u{FF41}pplication/grpc"), ("x-type", "application/grpc")])
        }
        row("/grpc/space", host: "grpc.example.com", method: "POST", seconds: -18) {
            $0.httpVersion = "HTTP/2.0 "
            $0.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", " application/grpc"), ("CONTENT-TYPE", "application/grpc")])
        }
        row("/gz", host: "gz.example.com", seconds: -10) {
            $0.responseHeaders = ExchangeRecord.encodeHeaders([
                ("Content-Encoding", "gzip"), ("Content-Type", "application/json; charset=utf-8"),
            ])
            // {"token":"gzip-word","name":"Zürich"}, Python's gzip.compress with mtime 0.
            $0.responseBody = Data([
                0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xab, 0x56, 0x2a, 0xc9, 0xcf, 0x4e, 0xcd, 0x53,
                0xb2, 0x52, 0x4a, 0xaf, 0xca, 0x2c, 0xd0, 0x2d, 0xcf, 0x2f, 0x4a, 0x51, 0xd2, 0x51, 0xca, 0x4b, 0xcc, 0x4d,
                0x05, 0x0a, 0x45, 0x1d, 0xde, 0x53, 0x94, 0x99, 0x9c, 0xa1, 0x54, 0x0b, 0x00, 0x77, 0xc6, 0x87, 0x1d, 0x26,
                0x00, 0x00, 0x00,
            ])
        }
        row("/deflate", host: "gz.example.com", method: "PUT", seconds: -9.9995) {
            // "deflated haystack, see <b>", zlib.compress.
            $0.requestHeaders = ExchangeRecord.encodeHeaders([("CONTENT-ENCODING", "deflate"), ("content-type", "text/html")])
            $0.requestBody = Data([
                0x78, 0x9c, 0x4b, 0x49, 0x4d, 0xcb, 0x49, 0x2c, 0x49, 0x4d, 0x51, 0xc8, 0x48, 0xac, 0x2c, 0x2e, 0x49, 0x4c,
                0xce, 0xd6, 0x51, 0x28, 0x4e, 0x4d, 0x55, 0xb0, 0x49, 0xb2, 0x03, 0x00, 0x84, 0x43, 0x09, 0x37,
            ])
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Encoding", "gzip"), ("Content-Type", "text/plain")])
            $0.responseBody = Data("not gzip at all".utf8)
        }
        row("/plain", host: "Intranet.Local", scheme: "http", method: "delete", status: 302, seconds: -0.001) {
            $0.url = "http://intranet.local:8080/plain?x=%41"
            $0.port = 8080
            $0.requestHeaders = ExchangeRecord.encodeHeaders([
                ("X-Quote", "say \"hi\" \\ back"), ("X-Tab", "a\tb\r\n"), ("X-Ünï", "Ça va ü"),
                ("Content-Type", ""),
            ])
            $0.responseHeaders = ExchangeRecord.encodeHeaders([
                ("Location", "/elsewhere"), ("Content-Type", "text/css"), ("Content-Type", "text/html"),
            ])
            $0.requestBody = Data()
            $0.responseBody = Data("Ünïcödé body".utf8)
            $0.clientAddress = "[::1]:40000"
            $0.serverAddress = "[2001:db8::1]:8080"
            $0.marker = ""
            $0.comment = ""
            $0.rule = "block"
        }
        row("/resent", method: "PATCH", status: 999, seconds: 0) {
            $0.resentFrom = ""
            $0.marker = ":star:"
            $0.comment = "Ünïcode note"
            $0.tlsMode = .passthrough
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "font/woff2")])
            $0.device = nil
            $0.clientAddress = nil
            $0.serverAddress = nil
        }
        row("/head", method: "HEAD", status: 0, seconds: 0.0004) {
            $0.requestHeaders = ExchangeRecord.encodeHeaders([])
            $0.responseHeaders = ExchangeRecord.encodeHeaders([("upgrade", "websocket"), ("Content-Type", " text/javascript")])
        }
        row("/future", host: "api.example.com", status: 204, seconds: 86_400) { $0.error = "" }
        return rows
    }
}
