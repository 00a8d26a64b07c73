import BusymateShared
import Foundation
import GRDB
import Testing

@testable import CaptureStore

/// An HTTP/2 exchange as the store keeps it and its readers show it: the
/// stream, the client connection, trailers (issue 23, "Store and reading").
@Suite struct HTTP2RowTests {
    static let base = Date(timeIntervalSince1970: 1_800_000_000)

    /// A gRPC call on stream 5 of connection `c7f3`, its status in the trailers.
    static func grpcRow(_ requestID: String = RequestID.make()) -> ExchangeRecord {
        var r = ExchangeRecord(
            requestID: requestID, startedAt: base, scheme: "https", method: "POST", host: "grpc.example.com", port: 443,
            path: "/helloworld.Greeter/SayHello", url: "https://grpc.example.com/helloworld.Greeter/SayHello", tlsMode: .mitm)
        r.httpVersion = "HTTP/2.0"
        r.status = 200
        r.reason = ""
        r.requestHeaders = ExchangeRecord.encodeHeaders([
            ("content-type", "application/grpc"), ("te", "trailers"), ("authorization", "Bearer t0k"),
        ])
        r.responseHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc")])
        r.streamID = 5
        r.connectionID = "c7f3"
        r.responseTrailers = ExchangeRecord.encodeHeaders([("grpc-status", "0"), ("grpc-message", "all \"fine\"")])
        return r
    }

    static func http1Row() -> ExchangeRecord {
        var r = ExchangeRecord(
            startedAt: base.addingTimeInterval(1), scheme: "https", method: "GET", host: "h1.example.com", port: 443,
            path: "/", url: "https://h1.example.com/", tlsMode: .mitm)
        r.httpVersion = "HTTP/1.1"
        r.status = 200
        r.responseHeaders = "[]"
        return r
    }

    @Test func streamConnectionAndTrailersAreStoredAndReadBackOnBothWritePaths() async throws {
        let store = try CaptureStoreTests.Store()
        let row = Self.grpcRow("grdb-path")
        var expected = row
        expected.id = try store.traffic.insert([row]).first?.id
        #expect(try store.traffic.find(requestID: "grdb-path") == expected)
        // The writer's hand-bound insert.
        var written = Self.grpcRow("writer-path")
        written.requestTrailers = ExchangeRecord.encodeHeaders([("x-checksum", "abc")])
        _ = try await store.traffic.save([written], keeping: .init(maxExchanges: 100, maxBytes: .max), size: nil)
        let read = try #require(try store.traffic.find(requestID: "writer-path"))
        written.id = read.id
        #expect(read == written)
        #expect(read.streamID == 5 && read.connectionID == "c7f3")
        #expect(
            ExchangeRecord.decodeHeaders(read.responseTrailers).map { "\($0.0)=\($0.1)" } == ["grpc-status=0", "grpc-message=all \"fine\""])
        // An HTTP/1 row has none of them: NULL, not empty.
        let plain = try store.traffic.insert([Self.http1Row()])[0]
        let back = try #require(try store.traffic.find(id: plain.id ?? 0))
        #expect(back.streamID == nil && back.connectionID == nil && back.requestTrailers == nil && back.responseTrailers == nil)
    }

    /// A store written by the version before keeps its rows, which read as
    /// HTTP/1 (no stream, no trailers), and takes HTTP/2 rows beside them.
    @Test func aStoreFromBeforeGainsTheColumnsAndKeepsItsRows() throws {
        let dir = URL(fileURLWithPath: "/tmp/bmh2-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let paths = GroupPaths(root: dir)
        do {
            let old = try DatabasePool(path: paths.captureDatabase.path)
            try CaptureDatabase.migrator.migrate(old, upTo: "v10: breakpoint deadlines")
            try old.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO exchanges (request_id, started_at, scheme, method, host, port, path, url, http_version, tls_mode)
                        VALUES ('old-row', '2027-01-15 08:00:00.000', 'https', 'GET', 'old.example.com', 443, '/', 'https://old.example.com/', 'HTTP/1.1', 'mitm')
                        """)
            }
        }
        let traffic = TrafficRepository(database: try CaptureDatabase(paths: paths))
        let old = try #require(try traffic.find(requestID: "old-row"))
        #expect(old.host == "old.example.com" && old.streamID == nil && old.connectionID == nil && old.responseTrailers == nil)
        _ = try traffic.insert([Self.grpcRow("new-row")])
        #expect(try traffic.find(requestID: "new-row")?.streamID == 5)
    }

    private func parsed(_ node: JSONNode) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(JSONWriter.write(node).utf8)) as? [String: Any])
    }

    @Test func jsonRowsCarryTheVersionStreamAndConnectionAndDetailsTheTrailers() throws {
        var row = Self.grpcRow()
        row.id = 7
        let summary = try parsed(ExchangeJSON.summary(row, resentFrom: nil))
        #expect(summary["http_version"] as? String == "HTTP/2.0")
        #expect(summary["stream_id"] as? Int == 5)
        #expect(summary["connection_id"] as? String == "c7f3")
        let detail = try parsed(ExchangeJSON.detail(row, resentFrom: nil, bodies: [:], breakpoints: []))
        let request = try #require(detail["request"] as? [String: Any])
        let response = try #require(detail["response"] as? [String: Any])
        #expect(request["http_version"] as? String == "HTTP/2.0")
        #expect(request["trailers"] is NSNull, "\(request)")
        #expect(response["trailers"] as? [[String]] == [["grpc-status", "0"], ["grpc-message", "all \"fine\""]])
        #expect(detail["stream_id"] as? Int == 5 && detail["connection_id"] as? String == "c7f3")
        // HTTP/1: the members are there, null.
        let h1 = try parsed(ExchangeJSON.detail(Self.http1Row(), resentFrom: nil, bodies: [:], breakpoints: []))
        #expect(h1["stream_id"] is NSNull && h1["connection_id"] is NSNull && h1["http_version"] as? String == "HTTP/1.1")
        #expect((h1["response"] as? [String: Any])?["trailers"] is NSNull)
    }

    @Test func curlAsksForHTTP2AsTheClientSpokeIt() {
        var row = Self.grpcRow()
        let tls = CurlCommandLine.command(for: row, payload: nil)
        #expect(tls.contains(" --http2 ") && !tls.contains("prior-knowledge"), "\(tls)")
        // In the clear, HTTP/2 is prior knowledge (an Upgrade: h2c is stripped, so stays HTTP/1.1).
        row.scheme = "http"
        row.url = "http://grpc.example.com/helloworld.Greeter/SayHello"
        #expect(CurlCommandLine.command(for: row, payload: nil).contains(" --http2-prior-knowledge "))
        let h1 = CurlCommandLine.command(for: Self.http1Row(), payload: nil)
        #expect(!h1.contains("--http2") && !h1.contains("--http1"), "\(h1)")
    }

    /// HAR as Chrome's DevTools writes HTTP/2 (`http/2.0`, its connection in
    /// `connection`); trailers, which HAR has no place for, in `_trailers`.
    @Test func harWritesHTTP2AsChromeDoesAndReadsItBack() throws {
        let dir = URL(fileURLWithPath: "/tmp/bmh2-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: dir) }
        let bodies = BodyStore(paths: GroupPaths(root: dir))
        var row = Self.grpcRow()
        row.requestTrailers = ExchangeRecord.encodeHeaders([("x-token", "s3cret"), ("authorization", "Bearer t0k")])
        let entry = HAR.entry(row, bodies: bodies)
        let request = try #require(entry["request"] as? [String: Any])
        let response = try #require(entry["response"] as? [String: Any])
        #expect(request["httpVersion"] as? String == "http/2.0" && response["httpVersion"] as? String == "http/2.0")
        #expect(entry["connection"] as? String == "c7f3" && entry["_streamId"] as? Int == 5)
        #expect(
            response["_trailers"] as? [[String: String]] == [
                ["name": "grpc-status", "value": "0"], ["name": "grpc-message", "value": "all \"fine\""],
            ])
        // --redact masks a credential in a trailer as in a header.
        let redacted = HAR.entry(row, bodies: bodies, redact: true)
        #expect(
            (redacted["request"] as? [String: Any])?["_trailers"] as? [[String: String]]
                == [["name": "x-token", "value": "s3cret"], ["name": "authorization", "value": "[redacted]"]])
        // Read back: the same row, as far as HTTP/2 goes.
        let json = try JSONSerialization.data(withJSONObject: entry)
        let back = try HARImport.record(try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any]), name: "h2.har")
        #expect(back.httpVersion == "HTTP/2.0" && back.streamID == 5 && back.connectionID == "c7f3")
        #expect(back.responseTrailers == row.responseTrailers && back.requestTrailers == row.requestTrailers)
        // HTTP/1.1 stays as its status line wrote it, with no stream or trailers.
        let h1 = HAR.entry(Self.http1Row(), bodies: bodies)
        #expect((h1["request"] as? [String: Any])?["httpVersion"] as? String == "HTTP/1.1")
        #expect(h1["connection"] == nil && h1["_streamId"] == nil && (h1["response"] as? [String: Any])?["_trailers"] == nil)
    }

    @Test(arguments: [
        ("http/2.0", "HTTP/2.0"), ("h2", "HTTP/2.0"), ("HTTP/2", "HTTP/2.0"), ("HTTP/2.0", "HTTP/2.0"), ("h3", "HTTP/3"),
        ("http/1.1", "HTTP/1.1"), ("HTTP/1.0", "HTTP/1.0"),
    ])
    func harVersionsFromOtherToolsReadAsBusymateStoresThem(_ written: String, _ stored: String) throws {
        let entry: [String: Any] = [
            "startedDateTime": "2027-01-15T08:00:00.000Z", "time": 12,
            "request": ["method": "GET", "url": "https://www.example.com/", "httpVersion": written, "headers": [] as [Any]],
            "response": ["status": 200, "statusText": "", "httpVersion": written, "headers": [] as [Any]],
            // Chrome's connection ids are numbers written as text.
            "connection": "204851",
        ]
        let r = try HARImport.record(entry, name: "chrome.har")
        #expect(r.httpVersion == stored && r.connectionID == "204851" && r.streamID == nil && r.responseTrailers == nil)
    }

    @Test func aHostileConnectionOrStreamInAHARIsLeftOut() throws {
        var entry: [String: Any] = [
            "request": [
                "method": "GET", "url": "https://www.example.com/", "httpVersion": "http/2.0", "headers": [] as [Any],
                "_trailers": [["name": "bad name", "value": "x"], ["name": "ok", "value": "line\r\nbreak"]],
            ],
            "connection": "\u{1B}]0;pwned\u{07}", "_streamId": -1,
        ]
        var r = try HARImport.record(entry, name: "x.har")
        #expect(r.connectionID == nil && r.streamID == nil && r.requestTrailers == nil)
        // Firefox writes the server's port there: no connection.
        entry["connection"] = "443"
        #expect(try HARImport.record(entry, name: "firefox.har").connectionID == nil)
        entry["connection"] = String(repeating: "a", count: 65)
        entry["_streamId"] = 1e20
        r = try HARImport.record(entry, name: "x.har")
        #expect(r.connectionID == nil && r.streamID == nil)
    }
}
