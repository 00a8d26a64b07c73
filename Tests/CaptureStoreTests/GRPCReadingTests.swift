import Foundation
import Testing

@testable import CaptureStore

/// gRPC bodies made readable: messages split from their prefixes, protobuf
/// decoded without a schema, the call's status. Bytes are built by hand
/// here (the gzip ones made once with Python's gzip module, mtime 0).
@Suite struct GRPCReadingTests {
    static func bytes(_ hex: String) -> Data {
        let digits = Array(hex.filter { !$0.isWhitespace })
        return Data(stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16) ?? 0 })
    }

    static func framed(_ message: Data, compressed: Bool = false, declared: Int? = nil) -> Data {
        let length = UInt32(declared ?? message.count)
        return Data([compressed ? 1 : 0, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)])
            + message
    }

    /// Every wire type and the readings of a length-delimited field.
    static let everything = bytes(
        """
        089601
        120568656c6c6f
        1a06082a12026869
        2206038e029ea705
        28feffffffffffffffff01
        35d00f4940
        39ffffffffffffffff
        4203ff00ff
        4805
        5200
        """)

    @Test func fieldsAreReadAsMitmproxyReadsThem() throws {
        let fields = try ProtobufWire.decode(Self.everything).get()
        #expect(fields.map(\.number) == Array(1...10))
        #expect(
            fields[2].value
                == .message([
                    ProtobufField(number: 1, wireType: .varint, value: .varint(42), offset: 0),
                    ProtobufField(number: 2, wireType: .len, value: .string("hi"), offset: 2),
                ]))
        #expect(fields[3].value == .packedVarints([3, 270, 86942], Self.bytes("038e029ea705")))
        #expect(fields[7].value == .bytes(Self.bytes("ff00ff")))
        #expect(
            ProtobufText.lines(fields) == [
                "1: 150  # sint: 75",
                "2: \"hello\"",
                "3:",
                "  1: 42  # sint: 21",
                "  2: \"hi\"",
                "4: [3, 270, 86942]  # packed varints (3), or bytes 038e029ea705",
                // An int32 of -2 is sent sign-extended to ten bytes.
                "5: -2  # u64: 18446744073709551614",
                "6: !fixed32 1078530000  # float: 3.14159012",
                "7: !fixed64 18446744073709551615  # i64: -1",
                "8: !bytes ff00ff",
                "9: 5  # sint: -3",
                "10: \"\"",
            ])
    }

    @Test func textIsQuotedSoNoEscapeSequenceReachesATerminal() throws {
        // A string holding ESC is not text: it is bytes (here, plausibly packed varints).
        let fields = try ProtobufWire.decode(Self.bytes("0a041b5b326a")).get()
        #expect(ProtobufText.lines(fields) == ["1: [27, 91, 50, 106]  # packed varints (4), or bytes 1b5b326a"])
        let binary = try ProtobufWire.decode(Self.bytes("0a041b5b32ff")).get()
        #expect(ProtobufText.lines(binary) == ["1: !bytes 1b5b32ff"])
        let quoted = try ProtobufWire.decode(Data([0x0A, 0x04]) + Data("a\"\nb".utf8)).get()
        #expect(ProtobufText.lines(quoted) == [#"1: "a\"\nb""#])
    }

    @Test func groupsTruncationAndBadWireTypesAreErrorsNotTraps() {
        func failure(_ hex: String) -> String? {
            if case let .failure(error) = ProtobufWire.decode(Self.bytes(hex)) { return error.description }
            return nil
        }
        #expect(failure("0b0c") == "field 1: a group (wire type 3), which is not decoded at byte 0")
        #expect(failure("0805120568656c") == "field 2 declares 5 bytes, 3 left at byte 2")
        #expect(failure("0896") == "field 1: a varint cut short or past 64 bits at byte 0")
        #expect(failure("0e00") == "wire type 6 (there is none such) at byte 0")
        #expect(failure("0001") == "field number 0 at byte 0")
        #expect(failure("15d00f") == "field 2: 4 bytes of fixed32, 2 left at byte 0")
        #expect(failure("08ffffffffffffffffff7f") == "field 1: a varint cut short or past 64 bits at byte 0")
        #expect(failure("") == nil)
    }

    @Test func hostileNestingStopsAtTheDepthLimitQuickly() throws {
        // 100,000 messages each in the next: deeper than any parser recurses.
        var inner = Self.bytes("0801")
        for _ in 0..<100_000 {
            var length = UInt64(inner.count)
            var prefix = [UInt8(0x0A)]
            while length >= 0x80 {
                prefix.append(UInt8(length & 0x7F) | 0x80)
                length >>= 7
            }
            prefix.append(UInt8(length))
            inner = Data(prefix) + inner
        }
        let started = Date()
        let fields = try ProtobufWire.decode(inner).get()
        #expect(Date().timeIntervalSince(started) < 5)
        var depth = 0
        var current = fields
        while case let .message(nested)? = current.first?.value {
            depth += 1
            current = nested
        }
        #expect(depth == ProtobufWire.Limits.standard.maxDepth - 1)
        if case .bytes? = current.first?.value {
        } else {
            Issue.record("past the limit a field stays bytes, not \(String(describing: current.first?.value).prefix(200))")
        }
        #expect(ProtobufText.lines(fields).count == depth + 1)
    }

    @Test func messagesAreSplitAndGzipOnesDecompressed() throws {
        let plain = Self.bytes("0a0568656c6c6f109601")
        let gzip = Self.bytes("1f8b0800000000000203e362cd48cdc9c91798c60800fe6934680a000000")
        let deflate = Self.bytes("789ce362cd48cdc9c91798c608000e5b02cb")
        let body = Self.framed(plain) + Self.framed(gzip, compressed: true) + Self.framed(Data())
        let split = GRPCMessages(body, encoding: "gzip")
        #expect(split.problem == nil)
        #expect(split.messages.map(\.compressed) == [false, true, false])
        #expect(split.messages.map(\.length) == [10, gzip.count, 0])
        #expect(split.messages.map(\.payload) == [plain, plain, Data()])
        #expect(split.messages[1].decompressed)
        #expect(GRPCMessages(Self.framed(deflate, compressed: true), encoding: "deflate").messages.first?.payload == plain)
        // Another encoding than the one used: said, and the bytes kept.
        let wrong = GRPCMessages(Self.framed(gzip, compressed: true), encoding: "snappy")
        #expect(wrong.messages.first?.problem == "compressed with snappy, which is not decoded here")
        #expect(wrong.messages.first?.payload == gzip)
    }

    @Test func aTruncatedLastMessageIsReportedAndTheOthersKept() throws {
        let plain = Self.bytes("0a0568656c6c6f")
        let cut = GRPCMessages(Self.framed(plain) + Self.framed(plain.prefix(3), declared: 7), encoding: nil)
        #expect(cut.messages.count == 2)
        #expect(cut.messages[0].payload == plain && !cut.messages[0].truncated)
        #expect(cut.messages[1].truncated && cut.messages[1].problem == "cut short: 3 of 7 bytes stored")
        #expect(
            GRPCMessages(Self.framed(plain) + Data([0, 0]), encoding: nil).problem
                == "2 bytes after the last message, too few for a message prefix")
        #expect(
            GRPCMessages(Data("HTTP/1.1 200".utf8), encoding: nil).problem
                == "a message flag byte 0x48 at byte 0 (a gRPC message starts with 0 or 1)")
    }

    @Test func theCallsStatusComesFromTrailersElseFromATrailersOnlyResponse() {
        let trailers = GRPCCall(
            path: "/helloworld.Greeter/SayHello", responseHeaders: [("content-type", "application/grpc")],
            responseTrailers: [("grpc-status", "5"), ("grpc-message", "no%20such%20user: caf%C3%A9 %zz")])
        #expect(trailers.service == "helloworld.Greeter" && trailers.method == "SayHello")
        #expect(trailers.status == 5 && trailers.statusName == "NOT_FOUND" && trailers.statusFrom == "trailers")
        #expect(trailers.message == "no such user: café %zz")
        let only = GRPCCall(path: "/a.B/C", responseHeaders: [("Grpc-Status", "16")], responseTrailers: [])
        #expect(only.status == 16 && only.statusName == "UNAUTHENTICATED" && only.statusFrom == "headers" && only.message == nil)
        let none = GRPCCall(path: "/not-grpc", responseHeaders: [], responseTrailers: [])
        #expect(none.service == nil && none.method == nil && none.status == nil)
        #expect(GRPCCall.statusName(0) == "OK" && GRPCCall.statusName(1) == "CANCELLED" && GRPCCall.statusName(99) == "code 99")
        // gRPC-Web sends its trailers in the body.
        let web = GRPCMessages(Data([0x80, 0, 0, 0, 33]) + Data("grpc-status: 3\r\ngrpc-message: x\r\n".utf8), encoding: nil)
        #expect(web.trailers?.map { "\($0.0)=\($0.1)" } == ["grpc-status=3", "grpc-message=x"])
    }

    @Test func onlyARequestOfTypeApplicationGRPCIsACall() {
        var r = ExchangeRecord(scheme: "http", method: "POST", host: "h", port: 80, path: "/upload", url: "http://h/upload", tlsMode: .none)
        r.requestHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/json")])
        #expect(GRPCExchange(r, bodies: [:], responseTrailers: []) == nil)
        r.requestHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "application/grpc-web+proto")])
        let call = GRPCExchange(r, bodies: [:], responseTrailers: [])
        #expect(call?.lines() == ["gRPC call (its path is not /package.Service/Method)", "request: 0 messages"])
    }
}
