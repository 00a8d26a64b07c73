import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// What the page reads of an HTTP/2 exchange: its rows carry the version,
/// stream and connection, its detail the trailers; `~proto` and `~grpc`
/// filter the list; a Chrome HAR's `http/2.0` imports as HTTP/2.
@Suite struct WebHTTP2Tests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        Application(router: fixture.app.router())
    }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    /// A gRPC call on stream 3 of connection `k9`.
    static func insertCall(_ fixture: WebFixture) throws -> Int64 {
        var r = ExchangeRecord(
            startedAt: fixture.base.addingTimeInterval(100), scheme: "https", method: "POST", host: "grpc.example.com", port: 443,
            path: "/helloworld.Greeter/SayHello", url: "https://grpc.example.com/helloworld.Greeter/SayHello", tlsMode: .mitm)
        r.httpVersion = "HTTP/2.0"
        r.streamID = 3
        r.connectionID = "k9"
        r.status = 200
        r.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc+proto")])
        r.responseHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc")])
        r.responseTrailers = ExchangeRecord.encodeHeaders([("grpc-status", "5"), ("grpc-message", "not found")])
        return try #require(try fixture.traffic.insert([r]).first?.id)
    }

    @Test func rowsAndTheDetailCarryTheStreamTheConnectionAndTrailers() async throws {
        let fixture = try WebFixture()
        try fixture.insert(2)
        let id = try Self.insertCall(fixture)
        try await application(fixture).test(.router) { client in
            let headers: HTTPFields = [.cookie: fixture.cookie]
            try await client.execute(uri: "/api/exchanges?filter=~proto+h2", method: .get, headers: headers) { response throws in
                #expect(response.status == .ok)
                let rows = try #require(try Self.json(response.body)["exchanges"] as? [[String: Any]])
                #expect(rows.map { $0["id"] as? Int } == [Int(id)])
                let row = try #require(rows.first)
                #expect(
                    row["http_version"] as? String == "HTTP/2.0" && row["stream_id"] as? Int == 3 && row["connection_id"] as? String == "k9"
                )
                // `held` keeps its place after `rule`.
                #expect(row["held"] as? Bool == false)
            }
            try await client.execute(uri: "/api/exchanges?filter=~grpc", method: .get, headers: headers) { response throws in
                #expect((try Self.json(response.body)["exchanges"] as? [[String: Any]])?.map { $0["id"] as? Int } == [Int(id)])
            }
            try await client.execute(uri: "/api/exchanges?filter=!~grpc", method: .get, headers: headers) { response throws in
                #expect((try Self.json(response.body)["exchanges"] as? [[String: Any]])?.count == 2)
            }
            try await client.execute(uri: "/api/exchanges?filter=~proto+spdy", method: .get, headers: headers) { response throws in
                #expect(response.status == .badRequest)
                let body = try Self.json(response.body)
                #expect(body["position"] as? Int == 8 && (body["error"] as? String)?.contains("~proto is h1") == true, "\(body)")
            }
            try await client.execute(uri: "/api/exchanges/\(id)", method: .get, headers: headers) { response throws in
                let detail = try Self.json(response.body)
                #expect(detail["stream_id"] as? Int == 3 && detail["connection_id"] as? String == "k9")
                #expect((detail["request"] as? [String: Any])?["http_version"] as? String == "HTTP/2.0")
                #expect(
                    (detail["response"] as? [String: Any])?["trailers"] as? [[String]] == [
                        ["grpc-status", "5"], ["grpc-message", "not found"],
                    ])
                #expect((detail["request"] as? [String: Any])?["trailers"] is NSNull)
                #expect((detail["curl"] as? String)?.contains(" --http2 ") == true)
            }
        }
    }

    @Test func aChromeHARsHTTP2EntriesImportAsHTTP2() async throws {
        let fixture = try WebFixture()
        let har = #"""
            {"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"}, "entries": [
              {"startedDateTime": "2027-01-15T08:00:00.000Z", "time": 20, "connection": "318022",
               "request": {"method": "GET", "url": "https://www.example.com/app.js", "httpVersion": "http/2.0",
                           "headers": [{"name": ":authority", "value": "www.example.com"}, {"name": "accept", "value": "*/*"}]},
               "response": {"status": 200, "statusText": "", "httpVersion": "http/2.0", "headers": [{"name": "content-type", "value": "text/javascript"}],
                            "content": {"size": 2, "mimeType": "text/javascript", "text": "1;"}}},
              {"startedDateTime": "2027-01-15T08:00:01.000Z", "time": 20,
               "request": {"method": "GET", "url": "http://old.example.com/", "httpVersion": "HTTP/1.1", "headers": []},
               "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "headers": []}}
            ]}}
            """#
        try await application(fixture).test(.router) { client in
            let headers: HTTPFields = [.cookie: fixture.cookie, .secFetchSite: "same-origin"]
            try await client.execute(uri: "/api/har?name=chrome.har", method: .post, headers: headers, body: ByteBuffer(string: har)) {
                response throws in
                #expect(response.status == .ok, "\(String(buffer: response.body))")
            }
            try await client.execute(uri: "/api/exchanges?filter=~proto+h2", method: .get, headers: headers) { response throws in
                let rows = try #require(try Self.json(response.body)["exchanges"] as? [[String: Any]])
                #expect(rows.map { $0["url"] as? String } == ["https://www.example.com/app.js"])
                #expect(rows.first?["http_version"] as? String == "HTTP/2.0" && rows.first?["connection_id"] as? String == "318022")
            }
        }
    }
}
