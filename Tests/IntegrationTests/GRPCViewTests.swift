import Foundation
import Testing

/// A gRPC call's bodies made readable by `show` and `show --json`: the
/// request captured through the proxy (framed, one message gzip-compressed),
/// the response written into its row as a trailers-only error answer would
/// leave it (the HTTP/2 data path that carries real calls is another part of
/// issue 23). Protobuf bytes built by hand, the gzip ones by Python's gzip.
extension ApplianceTests {
    static func bytes(_ hex: String) -> Data {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return Data(stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16) ?? 0 })
    }

    static func grpcFrame(_ message: Data, compressed: Bool = false, declared: Int? = nil) -> Data {
        let length = UInt32(declared ?? message.count)
        return Data([compressed ? 1 : 0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
            + message
    }

    @Test func showDecodesAGRPCCallsMessagesAndStatus() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        // {1: "hello", 2: 150}, gzip-compressed; then {2: 150} as is.
        let request =
            Self.grpcFrame(Self.bytes("1f8b0800000000000203e362cd48cdc9c91798c60800fe6934680a000000"), compressed: true)
            + Self.grpcFrame(Self.bytes("109601"))
        let file = appliance.base.appendingPathComponent("request.bin")
        try request.write(to: file)
        let url = "http://127.0.0.1:\(origin.port)/helloworld.Greeter/SayHello"
        _ = try Command.curl(
            proxyPort: try appliance.proxyPort, url,
            extra: [
                "--data-binary", "@\(file.path)", "-H", "Content-Type: application/grpc", "-H", "grpc-encoding: gzip", "-H", "TE: trailers",
            ])
        let plainURL = "http://127.0.0.1:\(origin.port)/plain"
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, plainURL).code == 200)
        let rows = try appliance.rows("the call and the plain GET") { rows in
            [url, plainURL].allSatisfy { u in rows.contains { $0["url"] as? String == u } }
        }
        let id = try #require(rows.first { $0["url"] as? String == url }?["id"] as? Int)
        let plainID = try #require(rows.first { $0["url"] as? String == plainURL }?["id"] as? Int)

        // The answer: {1: "Hello, world", 3: {1: -1 as int32, 2: 1.5 as float}}, then a message cut short, and
        // the status in the headers (trailers only).
        let reply =
            Self.grpcFrame(Self.bytes("0a0c48656c6c6f2c20776f726c64 1a10 08ffffffffffffffffff01 150000c03f"))
            + Self.grpcFrame(Self.bytes("0a03"), declared: 9)
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], timeout=10)
            c.execute("UPDATE exchanges SET status = 200, reason = 'OK', response_headers = ?, response_body = ?, response_body_size = ?, "
                      "response_body_file = NULL, response_body_truncated = 0 WHERE id = ?",
                      ('[["content-type","application/grpc"],["grpc-status","5"],["grpc-message","no%20such%20user%3A%20caf%C3%A9"]]',
                       bytes.fromhex(sys.argv[2]), len(sys.argv[2]) // 2, int(sys.argv[3])))
            c.commit()
            """
        let hex = reply.map { String(format: "%02x", $0) }.joined()
        let update = try Command.run(
            "/usr/bin/python3", ["-c", script, appliance.group.appendingPathComponent("capture.sqlite").path, hex, "\(id)"])
        #expect(update.status == 0, "\(update.stderr)")

        let shown = try appliance.cli(["show", "\(id)", "--no-pager"])
        #expect(shown.status == 0, "\(shown.stderr)")
        let expected = """
            gRPC service helloworld.Greeter · method SayHello
            status 5 NOT_FOUND: no such user: café (from the headers)
            request: 2 messages (grpc-encoding gzip)
              request message 0 · compressed · 30 bytes, 10 decompressed
                1: "hello"
                2: 150  # sint: 75
              request message 1 · 3 bytes
                2: 150  # sint: 75
            response: 2 messages
              response message 0 · 32 bytes
                1: "Hello, world"
                3:
                  1: -1  # u64: 18446744073709551615
                  2: !fixed32 1069547520  # float: 1.5
              response message 1 · 9 bytes
                (cut short: 2 of 9 bytes stored)
                (not protobuf: field 1 declares 3 bytes, 0 left at byte 0)
                !bytes 0a03  # 2 bytes
            """
        #expect(shown.stdout.contains(expected), "\(shown.stdout)")

        let json = try appliance.cli(["show", "\(id)", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        let grpc = JSONObject(try #require(object["grpc"] as? [String: Any], "no grpc member: \(json.stdout)"))
        #expect(grpc.string("service") == "helloworld.Greeter" && grpc.string("method") == "SayHello")
        #expect(grpc.int("status") == 5 && grpc.string("status_name") == "NOT_FOUND" && grpc.string("message") == "no such user: café")
        #expect(grpc.string("status_from") == "headers" && grpc.string("request.encoding") == "gzip")
        let sent = grpc.array("request.messages")
        #expect(sent.count == 2)
        #expect(
            sent.first?["compressed"] as? Bool == true && sent.first?["size"] as? Int == 30 && sent.first?["decoded_size"] as? Int == 10)
        let fields = sent.first?["fields"] as? [[String: Any]] ?? []
        #expect(fields.map { $0["number"] as? Int } == [1, 2])
        #expect(fields.first?["type"] as? String == "string" && fields.first?["value"] as? String == "hello")
        #expect(
            fields.last?["wire_type"] as? String == "varint" && fields.last?["value"] as? Int == 150 && fields.last?["sint"] as? Int == 75)
        let answered = grpc.array("response.messages")
        let nested = (answered.first?["fields"] as? [[String: Any]])?.last
        #expect(nested?["type"] as? String == "message")
        let inner = nested?["fields"] as? [[String: Any]] ?? []
        #expect(inner.first?["int64"] as? Int == -1 && inner.last?["float"] as? Double == 1.5, "\(inner)")
        #expect(
            answered.last?["truncated"] as? Bool == true && answered.last?["fields"] is NSNull && answered.last?["hex"] as? String == "0a03"
        )

        // An exchange that is no gRPC call has no grpc member and no gRPC section.
        let plain = try appliance.cli(["show", "\(plainID)", "--json"])
        #expect(plain.status == 0 && plain.stdout.contains("\"request\"") && !plain.stdout.contains("\"grpc\""))
        #expect(!(try appliance.cli(["show", "\(plainID)", "--no-pager"]).stdout.contains("gRPC")))
    }

    /// With `grpc.descriptor_sets` naming a descriptor set (Tests/Fixtures/grpc/shop.pb, protoc's of
    /// shop.proto beside it), the same captured call is shown by field name; without it, by number.
    @Test func showNamesFieldsOnceSettingsNameADescriptorSet() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        // Order {customer: "Ada", status: SHIPPED, codes: [3, -1, 300]}, as protoc --encode writes it.
        let file = appliance.base.appendingPathComponent("order.bin")
        try Self.grpcFrame(Self.bytes("0a03416461 1802 220d03ffffffffffffffffff01ac02")).write(to: file)
        let url = "http://127.0.0.1:\(origin.port)/shop.v1.Orders/Place"
        _ = try Command.curl(
            proxyPort: try appliance.proxyPort, url, extra: ["--data-binary", "@\(file.path)", "-H", "Content-Type: application/grpc"])
        let rows = try appliance.rows("the call") { rows in rows.contains { $0["url"] as? String == url } }
        let id = try #require(rows.first { $0["url"] as? String == url }?["id"] as? Int)

        let numbers = try appliance.cli(["show", "\(id)", "--no-pager"]).stdout
        #expect(numbers.contains("    1: \"Ada\"\n    3: 2  # sint: 1\n") && !numbers.contains("customer"), "\(numbers)")

        try FileManager.default.copyItem(
            at: Command.repoRoot.appendingPathComponent("Tests/Fixtures/grpc/shop.pb"),
            to: appliance.group.appendingPathComponent("shop.pb"))
        var settings = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: appliance.settingsURL)) as? [String: Any])
        settings["grpc"] = ["descriptor_sets": ["shop.pb"]]
        try JSONSerialization.data(withJSONObject: settings).write(to: appliance.settingsURL)
        let named = try appliance.cli(["show", "\(id)", "--no-pager"])
        #expect(named.status == 0, "\(named.stderr)")
        let expected = """
            request: 1 message · shop.v1.Order
              request message 0 · 22 bytes
                customer (1): "Ada"
                status (3): SHIPPED  # 2
                codes (4): [3, -1, 300]  # packed (3)
            """
        #expect(named.stdout.contains(expected), "\(named.stdout)")
        let json = try appliance.cli(["show", "\(id)", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        let grpc = JSONObject(try #require(object["grpc"] as? [String: Any]))
        #expect(grpc.string("request.message_type") == "shop.v1.Order")
        let fields = (grpc.array("request.messages").first?["fields"] as? [[String: Any]]) ?? []
        #expect(fields.map { $0["name"] as? String } == ["customer", "status", "codes"])
        #expect(
            fields.map { $0["number"] as? Int } == [1, 3, 4] && fields[1]["enum"] as? String == "SHIPPED"
                && fields[2]["values"] as? [Int] == [3, -1, 300])
    }
}
