import BusymateShared
import Foundation
import Testing

@testable import CaptureStore

/// gRPC messages read with a FileDescriptorSet: Tests/Fixtures/grpc/shop.pb
/// is what protoc made of shop.proto beside it (`--include_imports`), and
/// the messages are what `protoc --encode` made of the text in each test.
@Suite struct GRPCSchemaTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/grpc")

    static func schema() throws -> ProtobufSchema {
        try ProtobufDescriptorSet.parse(try Data(contentsOf: fixtures.appendingPathComponent("shop.pb"))).get()
    }

    /// `protoc --encode=shop.v1.Order` of: customer "Ada"; two lines (A-1 ×2, B-7 ×1); status SHIPPED;
    /// codes [3, -1, 300]; totals {eur: -450, usd: 12}; token 00ff; delta -3; price 1.5; gift true;
    /// by_slot {4: {sku C, quantity 9}}; history [PAID, SHIPPED] unpacked; placed {1700000000 s, 5 ns};
    /// then field 99 (no such field in Order): varint 7.
    static let order = GRPCReadingTests.bytes(
        """
        0a0341646112070a03412d31100212070a03422d3710011802220d03ffffffffffffffffff01ac022a100a0365757210befcffffffffffffff01
        2a070a03757364100c320200ff380541000000000000f83f48015209080412050a014310095801580262080880e2cfaa061005
        980607
        """)

    @Test func aDescriptorSetGivesMessagesEnumsAndMethods() throws {
        let schema = try Self.schema()
        #expect(schema.files == ["google/protobuf/timestamp.proto", "shop.proto"])
        #expect(schema.method(path: "/shop.v1.Orders/Place") == ProtobufSchema.Method(input: "shop.v1.Order", output: "shop.v1.Receipt"))
        #expect(
            schema.method(path: "/shop.v1.Orders/Watch?x=1")
                == ProtobufSchema.Method(input: "shop.v1.Receipt", output: "shop.v1.Order.Line"))
        let order = try #require(schema.messages["shop.v1.Order"])
        #expect(
            order.fields[2]
                == ProtobufSchema.Field(
                    name: "lines", number: 2, type: .message, repeated: true, typeName: "shop.v1.Order.Line", packed: nil))
        #expect(order.fields[3]?.type == .enumeration && order.fields[3]?.typeName == "shop.v1.Status")
        #expect(order.fields[11]?.packed == false && order.fields[7]?.type == .sint32)
        let totals = try #require(order.fields[5]), lines = try #require(order.fields[2])
        #expect(schema.isMap(totals) && !schema.isMap(lines))
        #expect(schema.enums["shop.v1.Status"]?.values == [0: "STATUS_UNSPECIFIED", 1: "PAID", 2: "SHIPPED"])
        #expect(schema.messages["google.protobuf.Timestamp"]?.fields[1]?.name == "seconds")
    }

    @Test func aMessageIsReadByNameWithItsDeclaredTypes() throws {
        let fields = try ProtobufSchemaDecoder.decode(Self.order, as: "shop.v1.Order", schema: try Self.schema()).get()
        #expect(
            ProtobufText.lines(fields) == [
                "customer (1): \"Ada\"",
                "lines (2):",
                "  sku (1): \"A-1\"",
                "  quantity (2): 2",
                "lines (2):",
                "  sku (1): \"B-7\"",
                "  quantity (2): 1",
                "status (3): SHIPPED  # 2",
                "codes (4): [3, -1, 300]  # packed (3)",
                "totals (5):",
                "  \"eur\": -450",
                "  \"usd\": 12",
                "token (6): !bytes 00ff",
                "delta (7): -3",
                "price (8): 1.5",
                "gift (9): true",
                "by_slot (10):",
                "  4:",
                "    sku (1): \"C\"",
                "    quantity (2): 9",
                "history (11): PAID  # 1",
                "history (11): SHIPPED  # 2",
                "placed (12):",
                "  seconds (1): 1700000000",
                "  nanos (2): 5",
                "99: 7  # sint: -4",
            ])
    }

    @Test func theJSONKeepsItsShapeAndAddsNames() throws {
        let fields = try ProtobufSchemaDecoder.decode(Self.order, as: "shop.v1.Order", schema: try Self.schema()).get()
        let text = JSONWriter.write(ProtobufText.json(fields))
        let array = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
        let byNumber = Dictionary(array.map { ($0["number"] as? Int ?? 0, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(
            byNumber[1]?["name"] as? String == "customer" && byNumber[1]?["type"] as? String == "string"
                && byNumber[1]?["value"] as? String == "Ada")
        #expect(byNumber[3]?["proto_type"] as? String == "enum" && byNumber[3]?["type_name"] as? String == "shop.v1.Status")
        #expect(
            byNumber[3]?["value"] as? Int == 2 && byNumber[3]?["enum"] as? String == "SHIPPED"
                && byNumber[3]?["type"] as? String == "varint")
        #expect(byNumber[4]?["type"] as? String == "packed" && byNumber[4]?["values"] as? [Int] == [3, -1, 300])
        let entries = byNumber[5]?["entries"] as? [[String: [String: Any]]] ?? []
        #expect(byNumber[5]?["type"] as? String == "map" && entries.count == 2)
        #expect(entries.first?["key"]?["value"] as? String == "eur" && entries.first?["value"]?["value"] as? Int == -450)
        #expect(byNumber[7]?["value"] as? Int == -3 && byNumber[9]?["value"] as? Bool == true)
        #expect(
            byNumber[2]?["type"] as? String == "message" && (byNumber[2]?["fields"] as? [[String: Any]])?.first?["name"] as? String == "sku"
        )
        // A field the schema lacks: as without one, no name.
        #expect(byNumber[99]?["name"] == nil && byNumber[99]?["type"] as? String == "varint" && byNumber[99]?["sint"] as? Int == -4)
    }

    @Test func declaredTypesWinOverGuessesAndTheWireIsBelievedWhenItDisagrees() throws {
        let schema = try Self.schema()
        // Receipt {id: "r-1", status: PAID, cents: 1999, rate: 0.25}, as protoc encodes it.
        let receipt = try ProtobufSchemaDecoder.decode(
            GRPCReadingTests.bytes("0a03722d31100119cf07000000000000250000803e"),
            as: "shop.v1.Receipt", schema: schema
        ).get()
        #expect(ProtobufText.lines(receipt) == ["id (1): \"r-1\"", "status (2): PAID  # 1", "cents (3): 1999", "rate (4): 0.25"])
        // Order {token: "hi", customer: "\u{8}\u{1}"}: bytes that read as text stay bytes, and text that
        // parses as a message stays text; an enum number the enum lacks is shown as a number.
        let guessed = GRPCReadingTests.bytes("32026869 0a020801 1807")
        #expect(
            ProtobufText.lines(try ProtobufWire.decode(guessed).get()) == ["6: \"hi\"", "1:", "  1: 1  # sint: -1", "3: 7  # sint: -4"])
        let declared = try ProtobufSchemaDecoder.decode(guessed, as: "shop.v1.Order", schema: schema).get()
        #expect(
            ProtobufText.lines(declared) == [
                "token (6): !bytes 6869", "customer (1): \"\\u0008\\u0001\"", "status (3): 7  # no name for it in the enum",
            ])
        // customer sent as a varint, price as a varint: the wire's reading, with a note.
        let wrong = try ProtobufSchemaDecoder.decode(GRPCReadingTests.bytes("0805 4001"), as: "shop.v1.Order", schema: schema).get()
        #expect(
            ProtobufText.lines(wrong) == [
                "customer (1): 5  # sint: -3, declared string, but sent as varint",
                "price (8): 1  # sint: -1, declared double, but sent as varint",
            ])
        #expect(wrong.first?.note == "declared string, but sent as varint")
        // A packed field whose bytes are no varints, and a repeated enum sent packed though declared unpacked.
        let packed = try ProtobufSchemaDecoder.decode(GRPCReadingTests.bytes("2201ff 5a020102"), as: "shop.v1.Order", schema: schema).get()
        #expect(
            ProtobufText.lines(packed) == ["codes (4): !bytes ff  # its bytes are no int32", "history (11): [PAID, SHIPPED]  # packed (2)"])
    }

    @Test func aMissingOrCorruptFileIsNamedAndTheCallIsShownByNumber() throws {
        let group = FileManager.default.temporaryDirectory.appendingPathComponent("grpc-schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: group, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: group) }
        try FileManager.default.copyItem(
            at: Self.fixtures.appendingPathComponent("shop.proto"), to: group.appendingPathComponent("shop.proto"))
        let bad = DescriptorSets.load(["missing.pb", "shop.proto"], group: group)
        #expect(bad.schema == nil)
        #expect(bad.problems.count == 2)
        #expect(bad.problems.first == "descriptor set missing.pb: no such file; its fields are shown by number")
        #expect(
            bad.problems.last?.hasPrefix(
                "descriptor set shop.proto: not a FileDescriptorSet (make one with protoc --include_imports -o FILE.pb …): ") == true)

        var record = ExchangeRecord(
            scheme: "http", method: "POST", host: "h", port: 80, path: "/shop.v1.Orders/Place", url: "http://h/shop.v1.Orders/Place",
            tlsMode: .none)
        record.requestHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/grpc")])
        record.requestBody = GRPCReadingTests.framed(GRPCReadingTests.bytes("0a03416461"))
        let body = try ExchangeBody(record, .request, bodies: BodyStore(paths: GroupPaths(root: group)), raw: false)
        let shown = try #require(GRPCExchange(record, bodies: [.request: body], responseTrailers: [], schema: bad)).lines()
        #expect(shown.contains("(descriptor set missing.pb: no such file; its fields are shown by number)"))
        #expect(shown.contains("    1: \"Ada\""))

        // The good file with the bad ones: names, and the bad ones still named.
        let mixed = DescriptorSets.load(["missing.pb", Self.fixtures.appendingPathComponent("shop.pb").path], group: group)
        let named = try #require(GRPCExchange(record, bodies: [.request: body], responseTrailers: [], schema: mixed)).lines()
        #expect(named.contains("request: 1 message · shop.v1.Order") && named.contains("    customer (1): \"Ada\""), "\(named)")
        #expect(named.contains("(descriptor set missing.pb: no such file; its fields are shown by number)"))

        // A method the sets do not have: said, and numbers.
        record.path = "/shop.v1.Orders/Cancel"
        let other = try #require(GRPCExchange(record, bodies: [.request: body], responseTrailers: [], schema: mixed))
        #expect(
            other.lines().contains(
                "(the descriptor sets (2 .proto files) have no method /shop.v1.Orders/Cancel; its fields are shown by number)"))
        #expect(other.lines().contains("    1: \"Ada\""))
    }

    /// Bytes from the network and a file anyone in the group may name:
    /// mutated messages and descriptor sets are read or refused, never a
    /// trap, and what is read renders as lines and as JSON that parses.
    @Test func mutatedMessagesAndDescriptorSetsAreReadOrRefusedNeverATrap() throws {
        let schema = try Self.schema()
        let set = try Data(contentsOf: Self.fixtures.appendingPathComponent("shop.pb"))
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(max(bound, 1)))
        }
        func mutated(_ data: Data) -> Data {
            var bytes = [UInt8](data)
            for _ in 0...next(4) {
                switch next(3) {
                case 0: bytes[next(bytes.count)] = UInt8(next(256))
                case 1: bytes.insert(UInt8(next(256)), at: next(bytes.count))
                default: bytes.removeSubrange(next(bytes.count)..<bytes.count)
                }
                if bytes.isEmpty { bytes = [0x08] }
            }
            return Data(bytes)
        }
        var read = 0
        for _ in 0..<3000 {
            if case let .success(fields) = ProtobufSchemaDecoder.decode(mutated(Self.order), as: "shop.v1.Order", schema: schema) {
                read += 1
                _ = ProtobufText.lines(fields)
                #expect((try? JSONParser.parse(JSONWriter.write(ProtobufText.json(fields)))) != nil)
            }
        }
        var parsed = 0
        for _ in 0..<1000 {
            if case let .success(other) = ProtobufDescriptorSet.parse(mutated(set)) {
                parsed += 1
                for type in other.messages.keys.sorted().prefix(3) {
                    if case let .success(fields) = ProtobufSchemaDecoder.decode(Self.order, as: type, schema: other) {
                        _ = ProtobufText.lines(fields)
                    }
                }
            }
        }
        #expect(read > 0 && parsed > 0)
    }
}
