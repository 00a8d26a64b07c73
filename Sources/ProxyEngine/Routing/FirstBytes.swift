import NIOCore

/// What a connection's first bytes say it is, before any layer is chosen:
/// a TLS ClientHello (and the name it asks for), an HTTP/1 request line,
/// h2c's preface, or anything else. A pure function of the bytes so far:
/// the router feeds it what came and acts on the answer.
enum FirstBytes: Equatable {
    case tls(sni: String?)
    case http
    case h2c
    case opaque

    /// A TLS record opens with this content type (handshake).
    static let tlsHandshake: UInt8 = 0x16
    /// A ClientHello larger than this is passed through unread.
    static let peekLimit = 16 * 1024
    /// An HTTP method longer than this is no method.
    static let methodLimit = 24

    /// What `bytes` are, or nil while they cannot say yet. With `allowH2C`
    /// (`proxy.http2`) h2c's preface is h2c, else its `PRI` is a method like
    /// any other. Inside a CONNECT the host is known already: a TLS record's
    /// first byte is enough, and plaintext is HTTP at once (the HTTP layer
    /// answers what does not parse), so `opaque` never comes.
    static func classify(_ bytes: ByteBuffer, allowH2C: Bool, insideConnect: Bool = false) -> FirstBytes? {
        guard let first = bytes.getInteger(at: bytes.readerIndex, as: UInt8.self) else { return nil }
        if insideConnect { return tunnelled(bytes, first: first, allowH2C: allowH2C) }
        if first == tlsHandshake {
            switch TLSHello.parse(bytes, expecting: 1) {
            case let .found(hello): return .tls(sni: hello.sni)
            case .incomplete where bytes.readableBytes < peekLimit: return nil
            default: return .opaque
            }
        }
        // h2c with prior knowledge opens with its preface (its "PRI" would pass for a method).
        if first == UInt8(ascii: "P"), allowH2C {
            switch H2CPreface.matches(bytes) {
            case true?: return .h2c
            case nil: return nil
            case false?: break
            }
        }
        return method(bytes)
    }

    /// Inside a CONNECT: TLS, h2c, or HTTP.
    private static func tunnelled(_ bytes: ByteBuffer, first: UInt8, allowH2C: Bool) -> FirstBytes? {
        if first == tlsHandshake { return .tls(sni: nil) }
        switch allowH2C ? H2CPreface.matches(bytes) : false {
        case true?: return .h2c
        case nil: return nil
        case false?: return .http
        }
    }

    /// An HTTP method: upper-case letters, then a space.
    private static func method(_ bytes: ByteBuffer) -> FirstBytes? {
        for (offset, byte) in bytes.readableBytesView.enumerated() {
            if byte == UInt8(ascii: " ") { return offset > 0 ? .http : .opaque }
            guard (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte), offset < methodLimit else { return .opaque }
        }
        return nil
    }
}
