import NIOCore
import NIOHPACK

/// A hostile HTTP/2 client's bytes, written by hand (RFC 9113 §4.1, RFC
/// 7541) so a test can send what no well-behaved library would, and the
/// proxy's answer cut back into frames apart from NIO's decoder.
enum H2Wire {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    enum Kind: UInt8 {
        case data = 0, headers = 1, priority = 2, rstStream = 3, settings = 4, pushPromise = 5, ping = 6, goaway = 7, windowUpdate = 8,
            continuation = 9
    }
    static let endStream: UInt8 = 0x1, ack: UInt8 = 0x1, endHeaders: UInt8 = 0x4
    static let enhanceYourCalm: UInt32 = 0xB, cancel: UInt32 = 0x8, compressionError: UInt32 = 0x9, protocolError: UInt32 = 0x1

    static func frame(_ kind: Kind, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), kind.rawValue, flags] + be32(stream) + payload
    }

    static func be32(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    /// HPACK's integer with an N-bit prefix (RFC 7541 §5.1), `flags` in the first byte's high bits.
    static func integer(_ value: Int, prefix: Int, flags: UInt8) -> [UInt8] {
        let limit = (1 << prefix) - 1
        guard value >= limit else { return [flags | UInt8(value)] }
        var out = [flags | UInt8(limit)]
        var rest = value - limit
        while rest >= 128 {
            out.append(UInt8(rest % 128 + 128))
            rest /= 128
        }
        return out + [UInt8(rest)]
    }

    static func string(_ text: String) -> [UInt8] { integer(text.utf8.count, prefix: 7, flags: 0) + Array(text.utf8) }

    /// A literal field with a new name: into the dynamic table (§6.2.1) or not (§6.2.2).
    static func literal(_ name: String, _ value: String, indexed: Bool = false) -> [UInt8] {
        [indexed ? 0x40 : 0x00] + string(name) + string(value)
    }

    /// A field already in the table (§6.1): 62 is the newest dynamic entry.
    static func indexed(_ index: Int) -> [UInt8] { integer(index, prefix: 7, flags: 0x80) }

    /// An h2c request to the explicit proxy, as a header block.
    static func request(_ path: String, method: String = "GET", authority: String = "example.com") -> [UInt8] {
        literal(":method", method) + literal(":scheme", "http") + literal(":authority", authority) + literal(":path", path)
    }

    /// The preface, an empty SETTINGS and the ACK of the proxy's: a client the proxy's limits now apply to.
    static let opening = preface + frame(.settings) + frame(.settings, flags: ack)

    struct Frame {
        let kind: UInt8
        let flags: UInt8
        let stream: UInt32
        let payload: [UInt8]

        /// A GOAWAY's or RST_STREAM's error code.
        var errorCode: UInt32? {
            let at = kind == Kind.goaway.rawValue ? 4 : kind == Kind.rstStream.rawValue ? 0 : -1
            guard at >= 0, payload.count >= at + 4 else { return nil }
            return payload[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        func `is`(_ kind: Kind) -> Bool { self.kind == kind.rawValue }
    }

    /// The proxy's bytes as frames; the bytes after the last whole one are `rest`.
    static func frames(_ bytes: [UInt8]) -> (frames: [Frame], rest: Int) {
        var out: [Frame] = []
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard bytes.count - at - 9 >= length else { break }
            let stream = bytes[at + 5..<at + 9].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
            out.append(Frame(kind: bytes[at + 3], flags: bytes[at + 4], stream: stream, payload: Array(bytes[at + 9..<at + 9 + length])))
            at += 9 + length
        }
        return (out, bytes.count - at)
    }

    /// The :status of each response HEADERS frame (the proxy's HPACK context, kept by `decoder`).
    static func statuses(_ frames: [Frame], decoder: inout HPACKDecoder) throws -> [UInt32: String] {
        var out: [UInt32: String] = [:]
        for frame in frames where frame.is(.headers) {
            var block = ByteBuffer(bytes: frame.payload)
            let headers = try decoder.decodeHeaders(from: &block)
            if let status = headers.first(name: ":status") { out[frame.stream] = status }
        }
        return out
    }
}
