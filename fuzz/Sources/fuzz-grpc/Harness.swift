// The gRPC reading of a stored body (GRPCMessages, ProtobufWire,
// ProtobufText, GRPCCall): `show`, `show --json` and the web detail run it
// over bodies captured from the network.
//
// Input: the first byte picks the side's grpc-encoding (gzip, deflate,
// identity, snappy, none); the rest is the body, split and decoded as the
// views do, and also decoded whole as one protobuf message. A first byte
// with its high bit set picks the descriptor-set half instead (Schema.swift).
//
// Properties:
// - it never traps, whatever the bytes (lengths past the end, bad flags,
//   groups, varints past 64 bits, nesting past any stack, gzip bombs);
// - the messages split lie within the body, in order, each stored part no
//   longer than its prefix declares, and decompressed ones within the cap;
// - decoded fields have field numbers of 1 to 2^29-1, nest no deeper than
//   the limit, and count no more than the limit;
// - the lines and the JSON render; the JSON parses back;
// - a call's status and message read from headers made of the same bytes.
import BusymateShared
import Foundation
import FuzzSupport

@testable import CaptureStore

func depth(_ fields: [ProtobufField]) -> Int {
    var deepest = 0
    for field in fields {
        if case let .message(nested) = field.value { deepest = max(deepest, 1 + depth(nested)) }
    }
    return deepest
}

func count(_ fields: [ProtobufField]) -> Int {
    fields.reduce(0) { total, field in
        if case let .message(nested) = field.value { return total + 1 + count(nested) }
        return total + 1
    }
}

func check(_ result: Result<[ProtobufField], ProtobufWire.DecodeError>, size: Int) {
    let limits = ProtobufWire.Limits.standard
    switch result {
    case let .success(fields):
        Fuzz.check(depth(fields) < limits.maxDepth, "nested \(depth(fields)) deep, past the limit of \(limits.maxDepth)")
        Fuzz.check(count(fields) <= limits.maxFields, "\(count(fields)) fields, past the limit")
        func numbers(_ fields: [ProtobufField]) {
            for field in fields {
                Fuzz.check((1...(1 << 29) - 1).contains(field.number), "field number \(field.number)")
                Fuzz.check(field.offset >= 0 && field.offset < size, "a field at \(field.offset) of \(size) bytes")
                if case let .message(nested) = field.value { numbers(nested) }
            }
        }
        numbers(fields)
        Fuzz.check(ProtobufText.lines(fields).count >= fields.count, "fewer lines than fields")
        let json = JSONWriter.write(ProtobufText.json(fields))
        Fuzz.check((try? JSONParser.parse(json)) != nil, "the fields' JSON does not parse back: \(Fuzz.show(json.prefix(200)))")
    case let .failure(error):
        Fuzz.check(error.offset >= 0 && error.offset <= size, "an error at \(error.offset) of \(size) bytes")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        guard let selector = input.first else { return }
        if selector & 0x80 != 0 {
            fuzzDescriptorSet(selector, Array(input.dropFirst())[...])
            return
        }
        let body = Data(input.dropFirst())
        let encoding = [nil, "gzip", "deflate", "identity", "snappy"][Int(selector) % 5]
        let split = GRPCMessages(body, encoding: encoding)
        var stored = 0
        for (i, message) in split.messages.enumerated() {
            Fuzz.check(message.index >= i, "message \(i) numbered \(message.index)")
            Fuzz.check(message.stored <= message.length, "\(message.stored) bytes stored of a message of \(message.length)")
            Fuzz.check(message.truncated == (message.stored < message.length), "truncated says otherwise")
            Fuzz.check(!message.decompressed || message.payload.count <= GRPCMessages.maxMessageSize, "decompressed past the cap")
            Fuzz.check(message.decompressed || message.payload.count == message.stored, "a payload not the stored bytes")
            stored += 5 + message.stored
            check(ProtobufWire.decode(message.payload), size: message.payload.count)
        }
        Fuzz.check(stored <= body.count, "\(stored) bytes of messages in a body of \(body.count)")
        check(ProtobufWire.decode(body), size: body.count)

        // The same bytes as a call's path and status headers.
        let text = String(decoding: body.prefix(256), as: UTF8.self)
        let call = GRPCCall(
            path: text, responseHeaders: [("grpc-status", text), ("grpc-message", text)], responseTrailers: split.trailers ?? [])
        _ = call.statusName
        _ = GRPCCall.percentDecoded(text)
        if let service = call.service { Fuzz.check(!service.contains("/"), "a service with a slash: \(Fuzz.show(service))") }
    }
}
