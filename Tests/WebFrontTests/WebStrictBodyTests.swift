import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// An API write with a key the API does not read is refused (400, naming
/// the key) instead of answering 200 and doing nothing; a broken
/// settings.json still shows the settings in force.
@Suite struct WebStrictBodyTests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        Application(router: fixture.app.router())
    }

    func headers(_ fixture: WebFixture) -> HTTPFields {
        [.secFetchSite: "same-origin", .cookie: fixture.cookie]
    }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    @Test func aSettingsPartWithAMisspelledKeyIsRefusedNamingItAndTheFileIsUntouched() async throws {
        let fixture = try WebFixture()
        let original = #"{"future_key": {"kept": true}, "ssl_proxying": {"include": [], "later_key": 1}}"# + "\n"
        try Data(original.utf8).write(to: fixture.paths.settings)
        let cases: [(part: String, body: String, key: String)] = [
            ("breakpoints", #"{"patterns": ["*.example/*"]}"#, "patterns"),
            ("ssl-proxying", #"{"include": ["a.example"], "exculde": []}"#, "exculde"),
            ("rules", #"[{"name": "r", "match": "*.example/*", "action": "block", "statsu": 418}]"#, "statsu"),
            ("upstream-proxy", #"{"host": "p.example", "port": 3128, "pasword": "x"}"#, "pasword"),
        ]
        try await application(fixture).test(.router) { client in
            for (part, body, key) in cases {
                try await client.execute(
                    uri: "/api/settings/\(part)", method: .put, headers: headers(fixture), body: ByteBuffer(string: body)
                ) { response throws in
                    #expect(response.status == .badRequest, "\(part): \(response.status)")
                    let error = try Self.json(response.body)["error"] as? String ?? ""
                    #expect(error.contains(key), "\(part): \(error)")
                }
                #expect(try String(contentsOf: fixture.paths.settings, encoding: .utf8) == original, "\(part) changed the file")
            }
            // Keys the file already had (a later version's) still pass back through the page's edit.
            let kept = #"{"include": ["a.example"], "exclude": [], "later_key": 1}"#
            try await client.execute(
                uri: "/api/settings/ssl-proxying", method: .put, headers: headers(fixture), body: ByteBuffer(string: kept)
            ) {
                #expect($0.status == .ok)
            }
            try await client.execute(
                uri: "/api/settings/breakpoints", method: .put, headers: headers(fixture),
                body: ByteBuffer(string: #"{"request": ["*.example/*"], "response": []}"#)
            ) { #expect($0.status == .ok) }
        }
    }

    @Test func otherJSONBodiesWithAnUnknownKeyAreRefusedNamingIt() async throws {
        let fixture = try WebFixture()
        let row = try fixture.insert(1)[0]
        let cases: [(method: HTTPRequest.Method, uri: String, body: String, key: String)] = [
            (.post, "/api/compose", #"{"url": "http://127.0.0.1:9/", "methd": "PUT"}"#, "methd"),
            (.post, "/api/exchanges/\(row.id ?? 0)/resend", #"{"heders": [["A", "b"]]}"#, "heders"),
            (.post, "/api/held/1", #"{"action": "continue", "raw_text": "GET / HTTP/1.1\r\n\r\n"}"#, "raw_text"),
            (.post, "/api/rules/test", #"{"url": "https://a.example/", "method": "GET", "headers": []}"#, "headers"),
            (.delete, "/api/exchanges", #"{"confirm": true, "really": true}"#, "really"),
        ]
        try await application(fixture).test(.router) { client in
            for (method, uri, body, key) in cases {
                try await client.execute(uri: uri, method: method, headers: headers(fixture), body: ByteBuffer(string: body)) {
                    response throws in
                    #expect(response.status == .badRequest, "\(uri): \(response.status)")
                    let error = try Self.json(response.body)["error"] as? String ?? ""
                    #expect(error.contains("\"\(key)\""), "\(uri): \(error)")
                }
            }
            // Nothing was cleared.
            #expect(try fixture.traffic.count() == 1)
        }
    }

    @Test func aBrokenSettingsFileShowsTheLastGoodSettingsInForceAndTheErrorWithItsLine() async throws {
        let fixture = try WebFixture()
        let good = """
            {
              "ssl_proxying": {"include": ["api.example.com"], "exclude": []},
              "rules": [{"name": "teapot", "match": "*/teapot*", "action": "block", "status": 418}]
            }

            """
        try Data(good.utf8).write(to: fixture.paths.settings)
        try await application(fixture).test(.router) { client in
            // The page loaded once while the file was good.
            try await client.execute(uri: "/api/settings", method: .get, headers: headers(fixture)) { #expect($0.status == .ok) }
            // A stray comma on line 2.
            try Data(good.replacingOccurrences(of: #""exclude": []},"#, with: #""exclude": [],},"#).utf8).write(to: fixture.paths.settings)
            try await client.execute(uri: "/api/settings", method: .get, headers: headers(fixture)) { response throws in
                let body = try Self.json(response.body)
                #expect(body["valid"] as? Bool == false)
                // As the CLI says it ("2:30: …"), and the line and column on their own.
                #expect((body["error"] as? String)?.hasPrefix("2:") == true, "\(body["error"] ?? "")")
                #expect(body["error_line"] as? Int == 2)
                #expect((body["error_column"] as? Int ?? 0) > 1)
                #expect(body["in_force"] as? String == "last_good")
                #expect((body["ssl_proxying"] as? [String: Any])?["include"] as? [String] == ["api.example.com"])
                #expect(((body["rules"] as? [[String: Any]])?.first)?["name"] as? String == "teapot")
            }
        }
    }
}
