import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import WebFront

/// Marks and comments from the page: kept in the store, read back in the
/// list and the detail, found by the filter; a misspelt key changes nothing.
@Suite struct WebAnnotationTests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        Application(router: fixture.app.router())
    }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: buffer)) as? [String: Any])
    }

    @Test func aMarkAndACommentAreKeptFilteredAndABadKeyIsRefused() async throws {
        let fixture = try WebFixture()
        let rows = try fixture.insert(3)
        let id = try #require(rows[1].id)
        try await application(fixture).test(.router) { client in
            var headers = HTTPFields()
            headers[.cookie] = fixture.cookie
            headers[.secFetchSite] = "same-origin"
            let put = #"{"marker": "🔥", "comment": "the slow one"}"#
            try await client.execute(uri: "/api/exchanges/\(id)/annotation", method: .put, headers: headers, body: ByteBuffer(string: put))
            { response throws in
                #expect(response.status == .ok)
                let body = try Self.json(response.body)
                #expect(body["marker"] as? String == "🔥" && body["comment"] as? String == "the slow one", "\(body)")
            }
            try await client.execute(uri: "/api/exchanges?filter=~marked", method: .get, headers: headers) { response throws in
                let rows = try Self.json(response.body)["exchanges"] as? [[String: Any]] ?? []
                #expect(rows.compactMap { $0["id"] as? Int } == [Int(id)], "\(rows)")
                #expect(rows.first?["comment"] as? String == "the slow one")
            }
            try await client.execute(uri: "/api/exchanges?filter=~comment%20slow", method: .get, headers: headers) { response throws in
                #expect((try Self.json(response.body)["exchanges"] as? [[String: Any]])?.count == 1)
            }
            // Misspelt: refused by name, and nothing changed.
            try await client.execute(
                uri: "/api/exchanges/\(id)/annotation", method: .put, headers: headers,
                body: ByteBuffer(string: #"{"markr": null}"#)
            ) { response throws in
                #expect(response.status == .badRequest)
                #expect((try Self.json(response.body)["error"] as? String)?.contains("markr") == true)
            }
            // Unmark; the comment stays until it is cleared too.
            try await client.execute(
                uri: "/api/exchanges/\(id)/annotation", method: .put, headers: headers,
                body: ByteBuffer(string: #"{"marker": null}"#)
            ) { #expect($0.status == .ok) }
            #expect(try fixture.traffic.find(id: id)?.marker == nil)
            #expect(try fixture.traffic.find(id: id)?.comment == "the slow one")
            try await client.execute(
                uri: "/api/exchanges/\(id)/annotation", method: .put, headers: headers,
                body: ByteBuffer(string: #"{"comment": ""}"#)
            ) { #expect($0.status == .ok) }
            #expect(try fixture.traffic.find(id: id)?.comment == nil)
            // A control character in a marker, and an exchange that is not there.
            try await client.execute(
                uri: "/api/exchanges/\(id)/annotation", method: .put, headers: headers,
                body: ByteBuffer(string: #"{"marker": "a\u001bb"}"#)
            ) { #expect($0.status == .unprocessableContent) }
            try await client.execute(
                uri: "/api/exchanges/99999/annotation", method: .put, headers: headers,
                body: ByteBuffer(string: #"{"marker": "x"}"#)
            ) { #expect($0.status == .notFound) }
            // Another site cannot mark.
            var foreign = headers
            foreign[.secFetchSite] = "cross-site"
            try await client.execute(
                uri: "/api/exchanges/\(id)/annotation", method: .put, headers: foreign,
                body: ByteBuffer(string: #"{"marker": "x"}"#)
            ) { #expect($0.status == .forbidden) }
            #expect(try fixture.traffic.find(id: id)?.marker == nil)
        }
    }
}
