import Foundation

/// A stored gRPC body split into its length-prefixed messages (a flag byte,
/// 1 when the message is compressed with the call's `grpc-encoding`, then 4
/// bytes of big-endian length, then the message). A body cut short (stored
/// past `capture.body_max`, or a call that broke off) gives the messages it
/// holds and says what is missing; nothing here traps on any bytes.
public struct GRPCMessages: Sendable {
    public struct Message: Sendable {
        public var index: Int
        public var compressed: Bool
        /// What the prefix declares: the message's bytes on the wire.
        public var length: Int
        /// What of them was stored (fewer when the body was cut short).
        public var stored: Int
        /// The message, decompressed when it was compressed and could be.
        public var payload: Data
        public var decompressed: Bool
        /// Why `payload` is not the whole message as sent, if it is not.
        public var problem: String?
        public var truncated: Bool { stored < length }
    }

    public var messages: [Message] = []
    /// More messages than are kept for display.
    public var omitted = 0
    /// What follows the last message and is none (a bad flag byte, or a
    /// prefix cut short).
    public var problem: String?
    /// gRPC-Web carries the trailers in the body, as a frame of its own
    /// (flag 0x80): they are here when it did.
    public var trailers: [(String, String)]?

    public static let maxMessages = 1000
    /// A compressed message may decompress to this much; all of a body's to
    /// BodyDecoder's cap.
    public static let maxMessageSize = 16 << 20

    /// `encoding` is the side's `grpc-encoding` header (gzip when absent, as
    /// mitmproxy assumes).
    public init(_ body: Data, encoding: String?) {
        let bytes = [UInt8](body)
        let coding = (encoding?.trimmingCharacters(in: .whitespaces).lowercased()).flatMap { $0.isEmpty ? nil : $0 } ?? "gzip"
        var budget = BodyDecoder.maxDecodedSize
        var index = 0
        var count = 0
        while index < bytes.count {
            let flag = bytes[index]
            guard bytes.count - index >= 5 else {
                problem = "\(bytes.count - index) bytes after the last message, too few for a message prefix"
                return
            }
            guard flag & ~0x81 == 0 else {
                problem = String(format: "a message flag byte 0x%02x at byte %d (a gRPC message starts with 0 or 1)", flag, index)
                return
            }
            let length = Int(bytes[index + 1]) << 24 | Int(bytes[index + 2]) << 16 | Int(bytes[index + 3]) << 8 | Int(bytes[index + 4])
            let start = index + 5
            let end = min(bytes.count, start + length)
            let raw = Data(bytes[start..<end])
            index = start + length
            if flag & 0x80 != 0 {
                trailers = Self.webTrailers(raw)
                continue
            }
            defer { count += 1 }
            guard messages.count < Self.maxMessages else {
                omitted += 1
                continue
            }
            var message = Message(
                index: count, compressed: flag & 1 == 1, length: length, stored: raw.count, payload: raw, decompressed: false)
            if message.truncated {
                message.problem = "cut short: \(raw.count) of \(length) bytes stored"
            } else if message.compressed {
                if coding == "identity" {
                    message.problem = "flagged compressed, but grpc-encoding is identity"
                } else if let plain = BodyDecoder.decode(raw, encoding: coding, limit: min(Self.maxMessageSize, budget)) {
                    message.payload = plain
                    message.decompressed = true
                    budget -= plain.count
                } else {
                    message.problem =
                        BodyDecoder.supported.contains(coding)
                        ? "cannot decompress \(coding) (or it decompresses to more than \(min(Self.maxMessageSize, budget) >> 20) MiB)"
                        : "compressed with \(coding), which is not decoded here"
                }
            }
            messages.append(message)
        }
    }

    /// A gRPC-Web trailers frame: HTTP/1-style header lines.
    static func webTrailers(_ data: Data) -> [(String, String)] {
        String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == "\r\n" || $0 == "\n" }).compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                line[..<colon].trimmingCharacters(in: .whitespaces).lowercased(),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            )
        }
    }
}
