/// HTTP/2 frames as their 9-byte headers cut a byte string (RFC 9113 §4.1),
/// read apart from NIO's decoder.
struct Frames {
    struct Frame {
        let type: UInt8
        let flags: UInt8
        let stream: UInt32
        let length: Int
        /// A GOAWAY's error code.
        let errorCode: UInt32?
    }

    var frames: [Frame] = []
    /// Bytes after the last whole frame.
    var rest = 0

    init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        let bytes = Array(bytes)
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard bytes.count - at - 9 >= length else { break }
            let stream =
                (UInt32(bytes[at + 5]) << 24 | UInt32(bytes[at + 6]) << 16 | UInt32(bytes[at + 7]) << 8 | UInt32(bytes[at + 8]))
                & 0x7FFF_FFFF
            let code =
                bytes[at + 3] == Self.goaway && length >= 8 ? bytes[at + 13..<at + 17].reduce(UInt32(0)) { $0 << 8 | UInt32($1) } : nil
            frames.append(Frame(type: bytes[at + 3], flags: bytes[at + 4], stream: stream, length: length, errorCode: code))
            at += 9 + length
        }
        rest = bytes.count - at
    }

    static let data: UInt8 = 0, headers: UInt8 = 1, rstStream: UInt8 = 3, settings: UInt8 = 4, ping: UInt8 = 6, goaway: UInt8 = 7
}
