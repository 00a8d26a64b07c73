import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// The API as a script or the page sees it, through Hummingbird's router
/// test client: the token guards every route, filters are refused with
/// their position, pages are keyset pages.
@Suite struct WebAPITests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        Application(router: fixture.app.router())
    }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    @Test func everyRouteButTheLoginRefusesARequestWithoutTheToken() async throws {
        let fixture = try WebFixture()
        try await application(fixture).test(.router) { client in
            for path in ["/api/exchanges", "/api/exchanges/1", "/api/status", "/api/exchanges/1/response/body"] {
                try await client.execute(uri: path, method: .get) { response throws in
                    #expect(response.status == .unauthorized, "\(path)")
                    #expect(try Self.json(response.body)["error"] as? String != nil)
                }
            }
            // The page and its files send a browser to the login.
            for path in ["/", "/main.js", "/detail.js", "/ca.pem"] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .seeOther, "\(path)")
                    #expect(response.headers[.location] == "/login")
                }
            }
            // A wrong cookie or a wrong bearer is no better.
            try await client.execute(
                uri: "/api/exchanges", method: .get, headers: [.cookie: "\(WebSession.cookieName)=\(String(repeating: "0", count: 64))"]
            ) {
                #expect($0.status == .unauthorized)
            }
            try await client.execute(uri: "/api/exchanges", method: .get, headers: [.authorization: "Bearer \(WebToken.generate())"]) {
                #expect($0.status == .unauthorized)
            }
            // The login page itself is open, and a wrong token gets it again.
            try await client.execute(uri: "/login", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/login?token=nope", method: .get) { response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.setCookie] == nil)
            }
        }
    }

    @Test func theTokenBuysAnHttpOnlyStrictCookieThatOpensEverything() async throws {
        let fixture = try WebFixture()
        try await application(fixture).test(.router) { client in
            let cookie = try await client.execute(uri: "/login?token=\(fixture.token)", method: .get) { response -> String in
                #expect(response.status == .seeOther)
                #expect(response.headers[.location] == "/")
                let set = try #require(response.headers[.setCookie])
                #expect(set.contains("HttpOnly"))
                #expect(set.contains("SameSite=Strict"))
                // The cookie is not the token: it cannot be replayed as one.
                #expect(!set.contains(fixture.token))
                return String(set.split(separator: ";")[0])
            }
            try await client.execute(uri: "/", method: .get, headers: [.cookie: cookie]) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/html") == true)
                let csp = try #require(response.headers[.contentSecurityPolicy])
                #expect(csp.contains("script-src 'self'") && csp.contains("default-src 'self'") && !csp.contains("unsafe-inline"))
                #expect(response.headers[.xContentTypeOptions] == "nosniff")
            }
            try await client.execute(uri: "/api/exchanges", method: .get, headers: [.cookie: cookie]) { #expect($0.status == .ok) }
            // Scripts use the token as a bearer.
            try await client.execute(uri: "/api/exchanges", method: .get, headers: [.authorization: "Bearer \(fixture.token)"]) {
                #expect($0.status == .ok)
            }
            try await client.execute(uri: "/api/exchanges", method: .get, headers: [.authorization: "bearer \(fixture.token)"]) {
                #expect($0.status == .ok)
            }
        }
    }

    @Test func aStateChangingRequestFromAnotherSiteIsRefusedEvenWithTheCookie() async throws {
        let fixture = try WebFixture()
        try await application(fixture).test(.router) { client in
            let cookie = fixture.cookie
            try await client.execute(uri: "/api/logout", method: .post, headers: [.cookie: cookie, .secFetchSite: "cross-site"]) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(uri: "/api/logout", method: .post, headers: [.cookie: cookie, .origin: "http://evil.example"]) {
                #expect($0.status == .forbidden)
            }
            // Neither header: no browser's request; refused too.
            try await client.execute(uri: "/api/logout", method: .post, headers: [.cookie: cookie]) { #expect($0.status == .forbidden) }
            try await client.execute(uri: "/api/logout", method: .post, headers: [.cookie: cookie, .secFetchSite: "same-origin"]) {
                response in
                #expect(response.status == .ok)
                #expect(response.headers[.setCookie]?.contains("Max-Age=0") == true)
            }
        }
    }

    @Test func aBadFilterIsRefusedWithItsPosition() async throws {
        let fixture = try WebFixture()
        try fixture.insert(3)
        try await application(fixture).test(.router) { client in
            let filter = "~d api.example.com & ~zz".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            try await client.execute(uri: "/api/exchanges?filter=\(filter)", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(response.status == .badRequest)
                let body = try Self.json(response.body)
                // 1-based, as the CLI's "position N": the ~ of ~zz.
                #expect(body["position"] as? Int == 22)
                #expect((body["error"] as? String)?.isEmpty == false)
            }
            // `+` is a space, as a form writes it.
            try await client.execute(uri: "/api/exchanges?filter=~c+200", method: .get, headers: [.cookie: fixture.cookie]) {
                response throws in
                #expect(response.status == .ok)
                #expect((try Self.json(response.body)["exchanges"] as? [Any])?.count == 3)
            }
        }
    }

    @Test func pagesAreKeysetPagesNewestFirstThatMeetWithoutOverlap() async throws {
        let fixture = try WebFixture()
        try fixture.insert(230)
        try fixture.insert(20, from: 230, host: "other.example.org", status: 404)
        try await application(fixture).test(.router) { client in
            var seen: [Int] = []
            var before: Int?
            var pages = 0
            repeat {
                let uri = "/api/exchanges?limit=100" + (before.map { "&before=\($0)" } ?? "")
                before = try await client.execute(uri: uri, method: .get, headers: [.cookie: fixture.cookie]) { response -> Int? in
                    #expect(response.status == .ok)
                    let body = try Self.json(response.body)
                    let rows = try #require(body["exchanges"] as? [[String: Any]])
                    seen += rows.compactMap { $0["id"] as? Int }
                    return body["next"] as? Int
                }
                pages += 1
            } while before != nil && pages < 10
            #expect(pages == 3)
            #expect(seen == Array((1...250).reversed()))
            // A filtered list pages the same way.
            let filter = "~c 404 | ~d other.example.org"
            let encoded = filter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
            try await client.execute(uri: "/api/exchanges?limit=15&filter=\(encoded)", method: .get, headers: [.cookie: fixture.cookie]) {
                response in
                let body = try Self.json(response.body)
                let rows = try #require(body["exchanges"] as? [[String: Any]])
                #expect(rows.compactMap { $0["id"] as? Int } == Array((236...250).reversed()))
                #expect(rows.allSatisfy { $0["host"] as? String == "other.example.org" && $0["status"] as? Int == 404 })
                #expect(body["next"] as? Int == 236)
            }
        }
    }

    @Test func aGzipJSONBodyIsDescribedDecodedInItsOwnOrderAndServedAsBytesOnly() async throws {
        let fixture = try WebFixture()
        let (record, json) = try fixture.insertGzipJSON()
        let id = try #require(record.id)
        try await application(fixture).test(.router) { client in
            try await client.execute(uri: "/api/exchanges/\(id)", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(response.status == .ok)
                // Read as text: the order of keys is the point.
                let text = String(buffer: response.body)
                let detail = try Self.json(response.body)
                let body = try #require((detail["response"] as? [String: Any])?["body"] as? [String: Any])
                #expect(body["kind"] as? String == "json")
                #expect(body["decoded"] as? Bool == true)
                #expect(body["content_encoding"] as? String == "gzip")
                #expect(body["text"] as? String == json)
                #expect(text.contains(#"12345678901234567890"#))
                #expect(body["preview_url"] == nil)
                #expect((detail["curl"] as? String)?.hasPrefix("curl -g ") == true)
            }
            // Decoded bytes, and the stored (gzip) ones, never as the captured type.
            try await client.execute(uri: "/api/exchanges/\(id)/response/body", method: .get, headers: [.cookie: fixture.cookie]) {
                response in
                #expect(String(buffer: response.body) == json)
                #expect(response.headers[.contentType] == "application/octet-stream")
                #expect(response.headers[.xContentTypeOptions] == "nosniff")
            }
            try await client.execute(uri: "/api/exchanges/\(id)/response/body?raw=1", method: .get, headers: [.cookie: fixture.cookie]) {
                response in
                #expect(Array(response.body.readableBytesView.prefix(2)) == [0x1f, 0x8b])
            }
            try await client.execute(uri: "/api/exchanges/\(id)/response/body?preview=1", method: .get, headers: [.cookie: fixture.cookie])
            {
                #expect($0.status == .unsupportedMediaType)
            }
            try await client.execute(uri: "/api/exchanges/\(id)/response/body?download=1", method: .get, headers: [.cookie: fixture.cookie])
            {
                #expect($0.headers[.contentDisposition] == "attachment; filename=\"busymate-\(id).response.json\"")
            }
            try await client.execute(uri: "/api/exchanges/\(id)/hex?side=response&raw=1", method: .get, headers: [.cookie: fixture.cookie])
            { response in
                let lines = try #require(try Self.json(response.body)["lines"] as? [String])
                #expect(lines.first?.hasPrefix("00000000  1f 8b") == true)
            }
            try await client.execute(uri: "/api/exchanges/999999", method: .get, headers: [.cookie: fixture.cookie]) {
                #expect($0.status == .notFound)
            }
        }
    }

    @Test func anImageIsPreviewedInASandboxAndAnHTMLBodyNeverIs() async throws {
        let fixture = try WebFixture()
        func insert(_ type: String, _ bytes: [UInt8]) throws -> Int64 {
            var r = ExchangeRecord(
                startedAt: fixture.base, scheme: "http", method: "GET", host: "img.example", port: 80, path: "/",
                url: "http://img.example/", tlsMode: .none)
            r.status = 200
            r.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", type)])
            r.responseBody = Data(bytes)
            r.responseBodySize = bytes.count
            return try #require(try fixture.traffic.insert([r])[0].id)
        }
        let png = try insert("image/png", [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0])
        let html = try insert("text/html", Array("<script>alert(1)</script>".utf8))
        try await application(fixture).test(.router) { client in
            try await client.execute(uri: "/api/exchanges/\(png)/response/body?preview=1", method: .get, headers: [.cookie: fixture.cookie])
            { response in
                #expect(response.headers[.contentType] == "image/png")
                #expect(response.headers[.contentSecurityPolicy] == "sandbox; default-src 'none'")
            }
            try await client.execute(uri: "/api/exchanges/\(html)/response/body", method: .get, headers: [.cookie: fixture.cookie]) {
                response in
                #expect(response.headers[.contentType] == "application/octet-stream")
            }
            try await client.execute(
                uri: "/api/exchanges/\(html)/response/body?preview=1", method: .get, headers: [.cookie: fixture.cookie]
            ) {
                #expect($0.status == .unsupportedMediaType)
            }
        }
    }

    @Test func theHexViewReadsAWindowOfABodyFileAndRefusesALink() async throws {
        let fixture = try WebFixture()
        // 3 MiB where each 16-byte line holds its own index.
        var bytes = Data(capacity: 3 << 20)
        for line in 0..<((3 << 20) / 16) {
            bytes.append(contentsOf: withUnsafeBytes(of: UInt64(line).bigEndian) { Array($0) } + Array(repeating: 0xAB, count: 8))
        }
        let bodies = fixture.dir.appendingPathComponent("bodies")
        try bytes.write(to: bodies.appendingPathComponent("big.response"))
        try FileManager.default.createSymbolicLink(
            atPath: bodies.appendingPathComponent("link.response").path, withDestinationPath: "big.response")
        func insert(_ file: String) throws -> Int64 {
            var r = ExchangeRecord(
                startedAt: fixture.base, scheme: "http", method: "GET", host: "dl.example", port: 80, path: "/", url: "http://dl.example/",
                tlsMode: .none)
            r.status = 200
            r.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/octet-stream")])
            r.responseBodyFile = file
            r.responseBodySize = bytes.count
            return try #require(try fixture.traffic.insert([r])[0].id)
        }
        let big = try insert("big.response")
        let linked = try insert("link.response")
        try await application(fixture).test(.router) { client in
            try await client.execute(
                uri: "/api/exchanges/\(big)/hex?side=response&offset=\(2 << 20)&length=65536", method: .get,
                headers: [.cookie: fixture.cookie]
            ) { response in
                let object = try Self.json(response.body)
                let lines = try #require(object["lines"] as? [String])
                #expect(object["total"] as? Int == 3 << 20 && lines.count == 4096)
                // Line 131072 (2 MiB / 16) at offset 0x200000.
                #expect(
                    lines.first?.hasPrefix("00200000  00 00 00 00  00 02 00 00  ab") == true
                        || lines.first?.hasPrefix("00200000  00 00 00 00 00 02 00 00  ab") == true, "\(lines.first ?? "")")
            }
            // Past the end: no lines, the size still told.
            try await client.execute(
                uri: "/api/exchanges/\(big)/hex?side=response&offset=\(4 << 20)", method: .get, headers: [.cookie: fixture.cookie]
            ) { response in
                let object = try Self.json(response.body)
                #expect((object["lines"] as? [String])?.isEmpty == true && object["total"] as? Int == 3 << 20)
            }
            try await client.execute(uri: "/api/exchanges/\(linked)/hex?side=response", method: .get, headers: [.cookie: fixture.cookie]) {
                response in
                #expect(response.status != .ok)
                #expect(String(buffer: response.body).contains("symbolic link"), "\(response.status) \(String(buffer: response.body))")
            }
        }
    }
}

extension HTTPField.Name {
    static var secFetchSite: Self { Self("Sec-Fetch-Site")! }
}
