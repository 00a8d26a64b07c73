import BusymateShared
import CaptureStore
import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// Settings parts written through the validated edit; HAR out and back in;
/// clearing the capture.
@Suite struct WebSessionTests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        Application(router: fixture.app.router())
    }

    var page: HTTPFields { [.secFetchSite: "same-origin"] }

    @Test func aSettingsPartIsWrittenKeepingWhatTheFileHadAndABadOneIsRefusedByItsPath() async throws {
        let fixture = try WebFixture()
        let original = """
            {
              "mode": "proxy",
              "future_key": {"kept": true},
              "ssl_proxying": {"include": ["a.example"], "exclude": []}
            }

            """
        try Data(original.utf8).write(to: fixture.paths.settings)
        try await application(fixture).test(.router) { client in
            var headers = page
            headers[.cookie] = fixture.cookie
            let good = #"{"include": ["a.example", "*.b.example"], "exclude": ["x.b.example"]}"#
            try await client.execute(uri: "/api/settings/ssl-proxying", method: .put, headers: headers, body: ByteBuffer(string: good)) {
                #expect($0.status == .ok)
            }
            let text = try String(contentsOf: fixture.paths.settings, encoding: .utf8)
            let settings = try AppSettings.decode(text)
            #expect(settings.settings.sslInclude == ["a.example", "*.b.example"])
            #expect(settings.unknownKeys == ["future_key"])
            // A rule with an unknown action: refused, naming where, and the file is as it was.
            let bad = #"[{"name": "r", "match": "*.example/*", "action": "explode"}]"#
            try await client.execute(uri: "/api/settings/rules", method: .put, headers: headers, body: ByteBuffer(string: bad)) {
                response throws in
                #expect(response.status == .unprocessableContent)
                let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                #expect((body["key_path"] as? String)?.hasPrefix("rules[0]") == true, "\(body)")
            }
            #expect(try String(contentsOf: fixture.paths.settings, encoding: .utf8) == text)
            // Not a part the page may write.
            try await client.execute(uri: "/api/settings/web", method: .put, headers: headers, body: ByteBuffer(string: #"{}"#)) {
                #expect($0.status == .notFound)
            }
            try await client.execute(uri: "/api/settings", method: .get, headers: headers) { response throws in
                let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                #expect(body["valid"] as? Bool == true)
                let document = try #require(body["document"] as? [String: Any])
                #expect((document["future_key"] as? [String: Any])?["kept"] as? Bool == true)
                // The parts the page edits, as the file has them or empty.
                #expect((body["ssl_proxying"] as? [String: Any])?["exclude"] as? [String] == ["x.b.example"])
                #expect((body["rules"] as? [Any])?.isEmpty == true)
                #expect(body["upstream_proxy"] is NSNull)
            }
        }
    }

    @Test func theUpstreamProxysPasswordIsMaskedAndKeptThroughAnEdit() async throws {
        let fixture = try WebFixture()
        try Data(#"{"upstream_proxy": {"host": "10.0.0.1", "port": 3128, "username": "me", "password": "s3cret!"}}"#.utf8).write(
            to: fixture.paths.settings)
        try await application(fixture).test(.router) { client in
            var headers = page
            headers[.cookie] = fixture.cookie
            try await client.execute(uri: "/api/settings", method: .get, headers: headers) { response in
                let text = String(buffer: response.body)
                #expect(!text.contains("s3cret"), "\(text)")
                #expect(text.contains(#""password":"********""#))
            }
            // The page sends the proxy back as it got it, with a new port.
            let edit = #"{"host": "10.0.0.1", "port": 8080, "username": "me", "password": "********"}"#
            try await client.execute(uri: "/api/settings/upstream-proxy", method: .put, headers: headers, body: ByteBuffer(string: edit)) {
                #expect($0.status == .ok)
            }
            let settings = try AppSettings.decode(try String(contentsOf: fixture.paths.settings, encoding: .utf8)).settings
            #expect(settings.upstreamProxy?.port == 8080)
            #expect(settings.upstreamProxy?.password == "s3cret!")
        }
    }

    @Test func theHARExportReadsBackAsImportedExchanges() async throws {
        let fixture = try WebFixture()
        try fixture.insert(3)
        let (gzip, json) = try fixture.insertGzipJSON()
        try await application(fixture).test(.router) { client in
            var headers = page
            headers[.cookie] = fixture.cookie
            let har = try await client.execute(uri: "/api/har?filter=~d+json.example.com", method: .get, headers: headers) {
                response throws -> ByteBuffer in
                #expect(response.status == .ok)
                #expect(response.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"busymate-") == true)
                let root = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                let entries = try #require((root["log"] as? [String: Any])?["entries"] as? [[String: Any]])
                #expect(entries.count == 1)
                return response.body
            }
            try await client.execute(uri: "/api/har?name=/home/me/session.har", method: .post, headers: headers, body: har) {
                response throws in
                #expect(response.status == .ok)
                let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                #expect(body["imported"] as? Int == 1)
            }
            let imported = try #require(try fixture.traffic.list(TrafficRepository.Filter()).first { $0.imported != nil })
            #expect(imported.imported == "session.har")
            #expect(imported.url == gzip.url && imported.status == 200)
            #expect(imported.responseBody.map { String(decoding: $0, as: UTF8.self) } == json)
            #expect(imported.header("content-encoding", .response) == nil)
            try await client.execute(uri: "/api/har", method: .post, headers: headers, body: ByteBuffer(string: "{\"not\": \"har\"}")) {
                #expect($0.status == .unprocessableContent)
            }
        }
    }

    @Test func aHARImportNeverPushesCapturedRowsOutAndAFailureKeepsNothing() async throws {
        let fixture = try WebFixture()
        try Data(#"{"capture": {"max_exchanges": 2000}}"#.utf8).write(to: fixture.paths.settings)
        try fixture.insert(10)
        @Sendable func har(_ count: Int, bad: Int? = nil) -> ByteBuffer {
            let entries = (0..<count).map { i in
                i == bad
                    ? #"{"request": {"method": "GET", "url": "ftp://nope.example/"}}"#
                    : #"{"request": {"method": "GET", "url": "https://imported.example.com/\#(i)"}, "response": {"status": 200, "content": {"text": "x"}}}"#
            }
            return ByteBuffer(string: #"{"log": {"version": "1.2", "entries": [\#(entries.joined(separator: ","))], "pages": []}}"#)
        }
        try await application(fixture).test(.router) { client in
            var headers = page
            headers[.cookie] = fixture.cookie
            // 1,991 entries, room for 1,990: refused, saying so; nothing stored.
            try await client.execute(uri: "/api/har?name=big.har", method: .post, headers: headers, body: har(1_991)) { response throws in
                #expect(response.status == .conflict)
                let body = try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
                #expect((body["error"] as? String)?.contains("room for 1990 more") == true, "\(body)")
            }
            #expect(try fixture.traffic.count() == 10)
            // A bad entry after the first chunk was stored: the chunks stored are taken back.
            try await client.execute(uri: "/api/har?name=bad.har", method: .post, headers: headers, body: har(1_500, bad: 1_200)) {
                response throws in
                #expect(response.status == .unprocessableContent)
                #expect(String(buffer: response.body).contains("entry 1201"))
            }
            #expect(try fixture.traffic.count() == 10)
            try await client.execute(uri: "/api/har?name=fits.har", method: .post, headers: headers, body: har(1_990)) { response throws in
                #expect(response.status == .ok)
            }
            var all = TrafficRepository.Filter()
            all.limit = 5_000
            let rows = try fixture.traffic.list(all)
            #expect(rows.count == 2_000 && rows.filter { $0.imported == nil }.count == 10)
        }
    }

    @Test func clearingTheCaptureNeedsAConfirmationAndIdsGoOn() async throws {
        let fixture = try WebFixture()
        try fixture.insert(10)
        try await application(fixture).test(.router) { client in
            var headers = page
            headers[.cookie] = fixture.cookie
            try await client.execute(uri: "/api/exchanges", method: .delete, headers: headers) { #expect($0.status == .badRequest) }
            #expect(try fixture.traffic.count() == 10)
            try await client.execute(
                uri: "/api/exchanges", method: .delete, headers: headers, body: ByteBuffer(string: #"{"confirm": true}"#)
            ) {
                #expect($0.status == .ok)
            }
            #expect(try fixture.traffic.count() == 0)
            let next = try fixture.insert(1, from: 50)
            #expect(next.first?.id == 11)
        }
    }
}

/// What a hostile HAR file or a hostile origin cannot do to the web front.
@Suite struct WebHostileInputTests {
    @Test func aHARWithImpossibleValuesIsReadSafelyOrRefused() throws {
        func har(_ entry: String) -> Data { Data(#"{"log": {"entries": [\#(entry)]}}"#.utf8) }
        // A status no Int holds, a start in year 9999, a time of ages: kept in range, no trap.
        let records = try HARImport.records(
            har(
                #"""
                {"startedDateTime": "9999-12-31T23:59:59.999Z", "time": 1e300,
                 "request": {"method": "GET", "url": "http://a.example/x", "headers": [{"name": "Bad\r\nName", "value": "v"}, {"name": "X-Ok", "value": "line\r\nbreak"}, {"name": "X-Fine", "value": "1"}]},
                 "response": {"status": 1e19, "headers": [], "content": {"text": "hi"}}}
                """#), name: "evil.har")
        #expect(records.count == 1)
        #expect(records[0].status == nil)
        #expect(records[0].startedAt <= Date(timeIntervalSince1970: 4_102_444_800))
        #expect(ExchangeRecord.decodeHeaders(records[0].requestHeaders).map(\.0) == ["X-Fine"])
        // A method that is no method: refused, naming the entry.
        #expect(throws: HARImport.Failure.self) {
            try HARImport.records(
                har(#"{"request": {"method": "GET /x HTTP/1.1\r\nHost: evil", "url": "http://a.example/"}}"#), name: "evil.har")
        }
    }

    @Test func aHARFileIsReadAnEntryAtATimeWhateverItsLayout() throws {
        // A BOM, keys in any order, strings that hold brackets and escaped quotes, numbers and literals to skip.
        let text =
            "\u{FEFF}" + #"""
                 {"comment": "{[\"]}", "log": {"pages": [{"id": "p", "n": [1, -2.5e3, true, null]}], "version": "1.2",
                  "entries": [ {"request": {"method": "GET", "url": "https://a.example/{x}", "headers": [{"name": "X-Q", "value": "\"]}"}]}},
                               {"request": {"method": "POST", "url": "http://b.example/"}} ], "creator": {}}, "z": 0}
                """#
        let records = try HARImport.records(Data(text.utf8), name: "odd.har")
        #expect(records.map(\.host) == ["a.example", "b.example"])
        #expect(ExchangeRecord.decodeHeaders(records[0].requestHeaders).first?.1 == "\"]}")
        for broken in [
            #"{"log": {"entries": [{"request": {}}"#, #"{"log": {"entries": [1]}}"#, #"{"log": {}}"#, #"[]"#,
            #"{"log": {"entries": []}} x"#, "",
        ] {
            #expect(throws: HARImport.Failure.self, "\(broken)") { try HARImport.records(Data(broken.utf8), name: "bad.har") }
        }
        #expect(try HARImport.records(Data(#"{"log": {"entries": []}}"#.utf8), name: "empty.har").isEmpty)
    }

    @Test func aDecompressionBombIsNotDecodedPastTheLimit() throws {
        // 65 MiB of zeros: a few tens of kilobytes of gzip.
        var plain = ByteBuffer(repeating: 0, count: (BodyDecoder.maxDecodedSize) + (1 << 20))
        let bomb = Data(buffer: try plain.compress(with: .gzip()))
        #expect(bomb.count < 1 << 20)
        #expect(BodyDecoder.decode(bomb, encoding: "gzip") == nil)
        #expect(BodyDecoder.decode(bomb, encoding: "gzip", limit: .max)?.count == BodyDecoder.maxDecodedSize + (1 << 20))
    }
}
