import NIOCore

/// HTTP/2's connection preface (RFC 9113 §3.4): a client with prior
/// knowledge of h2c opens with it instead of an HTTP/1 request line.
enum H2CPreface {
    static let bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whether `buffer` starts with the preface; nil while too few bytes have come to tell.
    static func matches(_ buffer: ByteBuffer) -> Bool? {
        let view = buffer.readableBytesView
        for (offset, byte) in zip(bytes.indices, view) where bytes[offset] != byte { return false }
        return view.count >= bytes.count ? true : nil
    }
}
