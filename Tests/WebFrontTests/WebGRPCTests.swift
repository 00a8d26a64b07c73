import CaptureStore
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing

@testable import WebFront

/// The web detail of a gRPC call: the `grpc` member the page's gRPC body
/// view draws, each field with the line `show` prints (so a 64-bit value
/// reaches the page exact), and the view's script served with the page.
@Suite struct WebGRPCTests {
    @Test func theDetailOfAGRPCCallCarriesItsDecodedMessages() async throws {
        let fixture = try WebFixture()
        var r = ExchangeRecord(
            startedAt: fixture.base, scheme: "https", method: "POST", host: "grpc.example.com", port: 443,
            path: "/routeguide.RouteGuide/GetFeature", url: "https://grpc.example.com/routeguide.RouteGuide/GetFeature", tlsMode: .mitm)
        r.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc+proto"), ("te", "trailers")])
        // {1: {1: 409146138, 2: -746188906}}: a Point, its int32 longitude negative (ten bytes on the wire).
        let point = Data([0x0A, 0x11, 0x08, 0x9A, 0xA6, 0x8C, 0xC3, 0x01, 0x10, 0x96, 0x9F, 0x98, 0x9C, 0xFD, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        r.requestBody = Data([0, 0, 0, 0, UInt8(point.count)]) + point
        r.requestBodySize = r.requestBody?.count ?? 0
        r.status = 200
        r.responseHeaders = ExchangeRecord.encodeHeaders([
            ("content-type", "application/grpc"), ("grpc-status", "7"), ("grpc-message", "denied%21"),
        ])
        let id = try #require(try fixture.traffic.insert([r])[0].id)
        try await Application(router: fixture.app.router()).test(.router) { client in
            try await client.execute(uri: "/api/exchanges/\(id)", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(response.status == .ok)
                let detail = try WebAPITests.json(response.body)
                let grpc = try #require(detail["grpc"] as? [String: Any], "\(detail.keys)")
                #expect(grpc["service"] as? String == "routeguide.RouteGuide" && grpc["method"] as? String == "GetFeature")
                #expect(
                    grpc["status"] as? Int == 7 && grpc["status_name"] as? String == "PERMISSION_DENIED"
                        && grpc["message"] as? String == "denied!")
                let messages = try #require((grpc["request"] as? [String: Any])?["messages"] as? [[String: Any]])
                let outer = try #require((messages.first?["fields"] as? [[String: Any]])?.first)
                #expect(outer["type"] as? String == "message")
                let inner = outer["fields"] as? [[String: Any]] ?? []
                #expect(
                    inner.map { $0["display"] as? String } == ["409146138  # sint: 204573069", "-746188906  # u64: 18446744072963362710"])
                // No messages on a trailers-only answer.
                #expect(((grpc["response"] as? [String: Any])?["messages"] as? [Any])?.isEmpty == true)
            }
            try await client.execute(uri: "/grpcview.js", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(response.status == .ok && String(buffer: response.body).contains("export function renderGrpc("))
            }
            // The page's one script is its entry module; the body tab imports the view.
            try await client.execute(uri: "/", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(String(buffer: response.body).contains(#"<script type="module" src="/main.js"></script>"#))
            }
            try await client.execute(uri: "/detailbody.js", method: .get, headers: [.cookie: fixture.cookie]) { response in
                #expect(response.status == .ok && String(buffer: response.body).contains("from './grpcview.js'"))
            }
        }
    }

    /// With `grpc.descriptor_sets` in settings, the detail's fields carry
    /// their names (Tests/Fixtures/grpc: shop.pb is protoc's of shop.proto);
    /// a file that is not there is a note, and the fields are numbers.
    @Test func theDetailNamesFieldsFromTheDescriptorSetsInSettings() async throws {
        let fixture = try WebFixture()
        let shop = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
            "Fixtures/grpc/shop.pb")
        var r = ExchangeRecord(
            startedAt: fixture.base, scheme: "https", method: "POST", host: "grpc.example.com", port: 443,
            path: "/shop.v1.Orders/Place", url: "https://grpc.example.com/shop.v1.Orders/Place", tlsMode: .mitm)
        r.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc")])
        // Order {customer: "Ada", status: PAID}.
        let order = Data([0x0A, 0x03, 0x41, 0x64, 0x61, 0x18, 0x01])
        r.requestBody = Data([0, 0, 0, 0, UInt8(order.count)]) + order
        r.requestBodySize = r.requestBody?.count ?? 0
        let id = try #require(try fixture.traffic.insert([r])[0].id)
        func request(_ settings: String) async throws -> [String: Any] {
            try Data(settings.utf8).write(to: fixture.paths.settings)
            let body = try await Application(router: fixture.app.router()).test(.router) { client in
                try await client.execute(uri: "/api/exchanges/\(id)", method: .get, headers: [.cookie: fixture.cookie]) { response in
                    #expect(response.status == .ok)
                    return response.body
                }
            }
            return try WebAPITests.json(body)["grpc"] as? [String: Any] ?? [:]
        }
        let named = try await request(#"{"grpc": {"descriptor_sets": ["\#(shop.path)"]}}"#)
        let side = named["request"] as? [String: Any]
        let fields = (side?["messages"] as? [[String: Any]])?.first?["fields"] as? [[String: Any]] ?? []
        #expect(side?["message_type"] as? String == "shop.v1.Order" && (named["schema_notes"] as? [Any])?.isEmpty == true)
        #expect(fields.map { $0["name"] as? String } == ["customer", "status"], "\(fields)")
        #expect(fields.last?["display"] as? String == "PAID  # 1" && fields.last?["enum"] as? String == "PAID")

        let missing = try await request(#"{"grpc": {"descriptor_sets": ["gone.pb"]}}"#)
        #expect(missing["schema_notes"] as? [String] == ["descriptor set gone.pb: no such file; its fields are shown by number"])
        let numbers = ((missing["request"] as? [String: Any])?["messages"] as? [[String: Any]])?.first?["fields"] as? [[String: Any]] ?? []
        #expect(numbers.map { $0["name"] as? String } == [nil, nil] && numbers.first?["display"] as? String == "\"Ada\"")
    }
}
