import BusymateShared
import Foundation

/// A gRPC exchange made readable: the call (service, method, status) and
/// each side's messages decoded as protobuf, as the method's request and
/// response types when a descriptor set describes it, else without a
/// schema. What `show` prints in its "gRPC" section and `show --json` (and
/// the web detail) gives as `grpc` (docs/usage.md, "gRPC").
public struct GRPCExchange: Sendable {
    public var call: GRPCCall
    public var request: Side
    public var response: Side?
    /// Why fields are shown by number although descriptor sets are named
    /// (a file that could not be used, a method none of them has).
    public var schemaNotes: [String] = []

    public struct Side: Sendable {
        public var direction: BodyStore.Direction
        public var encoding: String?
        public var split: GRPCMessages
        public var decoded: [Reading]
        /// The message type its messages were read as (from a descriptor set).
        public var messageType: String?
        /// The body was stored cut short (past `capture.body_max`).
        public var bodyTruncated: Bool
    }

    /// What a message's bytes were read as.
    public enum Reading: Sendable {
        case fields([ProtobufField])
        /// Bytes that are no protobuf message, and why.
        case notProtobuf(ProtobufWire.DecodeError)
        /// Compressed and not decompressed (`problem` says why).
        case compressed

        init(_ message: GRPCMessages.Message, type: String?, schema: ProtobufSchema?) {
            if message.compressed && !message.decompressed {
                self = .compressed
                return
            }
            let result =
                if let type, let schema {
                    ProtobufSchemaDecoder.decode(message.payload, as: type, schema: schema)
                } else {
                    ProtobufWire.decode(message.payload)
                }
            switch result {
            case let .success(fields): self = .fields(fields)
            case let .failure(error): self = .notProtobuf(error)
            }
        }
    }

    /// A gRPC call is one whose request says `application/grpc…` (gRPC-Web
    /// included), as `~grpc` selects.
    public static func isGRPC(_ record: ExchangeRecord) -> Bool {
        record.header("content-type", .request)?.lowercased().hasPrefix("application/grpc") ?? false
    }

    /// The response's trailers as stored (`response_trailers`).
    public static func storedTrailers(_ record: ExchangeRecord) -> [(String, String)] {
        ExchangeRecord.decodeHeaders(record.responseTrailers)
    }

    /// nil when the exchange is no gRPC call. `schema`: the descriptor
    /// sets settings name, when they do.
    public init?(
        _ record: ExchangeRecord, bodies: [BodyStore.Direction: ExchangeBody], responseTrailers: [(String, String)],
        schema: DescriptorSets? = nil
    ) {
        guard Self.isGRPC(record) else { return nil }
        let method = schema?.schema?.method(path: record.path)
        func side(_ direction: BodyStore.Direction) -> Side {
            let body = bodies[direction]
            let encoding = record.header("grpc-encoding", direction)
            let split = GRPCMessages(body?.shown ?? Data(), encoding: encoding)
            let type = direction == .request ? method?.input : method?.output
            return Side(
                direction: direction, encoding: encoding, split: split,
                decoded: split.messages.map { Reading($0, type: type, schema: schema?.schema) }, messageType: type,
                bodyTruncated: body?.truncated ?? false)
        }
        schemaNotes = schema?.problems ?? []
        if let known = schema?.schema, method == nil {
            schemaNotes.append(
                "the descriptor sets (\(known.files.count) .proto file\(known.files.count == 1 ? "" : "s")) have no method \(record.path); its fields are shown by number"
            )
        } else if let method, schema?.schema?.messages[method.input] == nil || schema?.schema?.messages[method.output] == nil {
            schemaNotes.append(
                "the descriptor sets lack \(method.input) or \(method.output) (made without --include_imports?); its fields are shown by number"
            )
        }
        request = side(.request)
        response = record.status == nil ? nil : side(.response)
        let trailers = responseTrailers.isEmpty ? (response?.split.trailers ?? []) : responseTrailers
        call = GRPCCall(
            path: record.path, responseHeaders: ExchangeRecord.decodeHeaders(record.responseHeaders), responseTrailers: trailers)
    }

    // MARK: lines

    public func lines() -> [String] {
        let route = [call.service.map { "service \($0)" }, call.method.map { "method \($0)" }].compactMap { $0 }.joined(separator: " · ")
        var out = ["gRPC " + (route.isEmpty ? "call (its path is not /package.Service/Method)" : route)]
        if let status = call.status {
            out.append(
                "status \(status) \(GRPCCall.statusName(status))" + (call.message.flatMap { $0.isEmpty ? nil : ": \($0)" } ?? "")
                    + " (from the \(call.statusFrom ?? "trailers"))")
        } else if response != nil {
            out.append("status: none (no grpc-status in the response's trailers or headers)")
        }
        out += schemaNotes.map { "(\($0))" }
        for side in [request] + (response.map { [$0] } ?? []) {
            out += lines(side)
        }
        return out
    }

    private func lines(_ side: Side) -> [String] {
        let name = side.direction.rawValue
        let count = side.split.messages.count + side.split.omitted
        var out = [
            "\(name): \(count) message\(count == 1 ? "" : "s")" + (side.encoding.map { " (grpc-encoding \($0))" } ?? "")
                + (side.messageType.map { " · \($0)" } ?? "")
        ]
        for (message, decoded) in zip(side.split.messages, side.decoded) {
            var head = "  \(name) message \(message.index)" + (message.compressed ? " · compressed" : "") + " · \(message.length) bytes"
            if message.decompressed { head += ", \(message.payload.count) decompressed" }
            out.append(head)
            if let problem = message.problem { out.append("    (\(problem))") }
            out += Self.tree(message, decoded).map { "    " + $0 }
        }
        if side.split.omitted > 0 { out.append("  (\(side.split.omitted) more messages not shown)") }
        if let problem = side.split.problem { out.append("  (\(problem))") }
        if side.bodyTruncated { out.append("  (the body was stored cut short: later messages are missing)") }
        return out
    }

    /// A message's fields, or why it is not protobuf and its bytes.
    static func tree(_ message: GRPCMessages.Message, _ reading: Reading) -> [String] {
        switch reading {
        case let .fields(fields): return fields.isEmpty ? ["{}  # empty message"] : ProtobufText.lines(fields)
        case let .notProtobuf(error):
            return ["(not protobuf: \(error))", "!bytes \(ProtobufText.hex(message.payload))  # \(message.payload.count) bytes"]
        case .compressed: return ["!bytes \(ProtobufText.hex(message.payload))  # \(message.payload.count) bytes, compressed"]
        }
    }

    // MARK: JSON

    public func json() -> JSONNode {
        ExchangeJSON.object([
            ("service", ExchangeJSON.string(call.service)), ("method", ExchangeJSON.string(call.method)),
            ("status", ExchangeJSON.number(call.status)), ("status_name", ExchangeJSON.string(call.statusName)),
            ("message", ExchangeJSON.string(call.message)), ("status_from", ExchangeJSON.string(call.statusFrom)),
            ("request", Self.json(request)), ("response", response.map(Self.json) ?? JSONNode(.null)),
            ("schema_notes", ExchangeJSON.array(schemaNotes.map { ExchangeJSON.string($0) })),
        ])
    }

    /// Bytes of a message that is not protobuf are given up to this many.
    static let jsonHexLimit = 64 << 10

    static func json(_ side: Side) -> JSONNode {
        ExchangeJSON.object([
            ("encoding", ExchangeJSON.string(side.encoding)), ("message_type", ExchangeJSON.string(side.messageType)),
            (
                "messages",
                ExchangeJSON.array(
                    zip(side.split.messages, side.decoded).map { message, decoded in
                        var members: [ExchangeJSON.Member] = [
                            ("index", ExchangeJSON.number(message.index)), ("compressed", ExchangeJSON.bool(message.compressed)),
                            ("size", ExchangeJSON.number(message.length)), ("stored", ExchangeJSON.number(message.stored)),
                            (
                                "decoded_size",
                                ExchangeJSON.number(message.compressed && !message.decompressed ? nil : message.payload.count)
                            ),
                            ("truncated", ExchangeJSON.bool(message.truncated)), ("problem", ExchangeJSON.string(message.problem)),
                        ]
                        switch decoded {
                        case let .fields(fields):
                            members += [("fields", ProtobufText.json(fields)), ("error", JSONNode(.null))]
                        case let .notProtobuf(error):
                            members += [
                                ("fields", JSONNode(.null)), ("error", ExchangeJSON.string("not protobuf: \(error)")),
                                ("hex", ExchangeJSON.string(ProtobufText.hex(message.payload, limit: jsonHexLimit))),
                            ]
                        case .compressed:
                            members += [
                                ("fields", JSONNode(.null)), ("error", ExchangeJSON.string(message.problem)),
                                ("hex", ExchangeJSON.string(ProtobufText.hex(message.payload, limit: jsonHexLimit))),
                            ]
                        }
                        return ExchangeJSON.object(members)
                    })
            ),
            ("omitted", ExchangeJSON.number(side.split.omitted)), ("problem", ExchangeJSON.string(side.split.problem)),
            ("body_truncated", ExchangeJSON.bool(side.bodyTruncated)),
        ])
    }
}
