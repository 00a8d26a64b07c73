import NIOCore

/// What a ClientHello or ServerHello says in plaintext: the SNI and the
/// ALPN protocols a client asked for; the version and cipher suite a server chose.
struct TLSHello: Equatable, Sendable {
    var sni: String?
    var version: String?
    var cipher: String?
    /// The client's ALPN list, in its order (nil: it sent none).
    var alpn: [String]? = nil

    enum Parse: Equatable {
        case incomplete
        case notTLS
        case found(TLSHello)
    }

    /// Parses the hello at the start of a stream's bytes; handshake messages
    /// may span records.
    static func parse(_ bytes: ByteBuffer, expecting messageType: UInt8) -> Parse {
        var records = bytes
        var handshake = ByteBuffer()
        while true {
            guard records.readableBytes >= 5 else { return .incomplete }
            guard let type = records.readInteger(as: UInt8.self), let major = records.readInteger(as: UInt8.self),
                records.readInteger(as: UInt8.self) != nil, let length = records.readInteger(as: UInt16.self)
            else { return .incomplete }
            guard type == 22, major == 3 else { return .notTLS }
            guard var fragment = records.readSlice(length: Int(length)) else { return .incomplete }
            handshake.writeBuffer(&fragment)
            var view = handshake
            guard let kind = view.readInteger(as: UInt8.self), let high = view.readInteger(as: UInt8.self),
                let low = view.readInteger(as: UInt16.self)
            else { continue }
            guard kind == messageType else { return .notTLS }
            guard var body = view.readSlice(length: Int(high) << 16 | Int(low)) else { continue }
            guard let hello = messageType == 1 ? clientHello(&body) : serverHello(&body) else { return .notTLS }
            return .found(hello)
        }
    }

    private static func clientHello(_ body: inout ByteBuffer) -> TLSHello? {
        guard body.readInteger(as: UInt16.self) != nil, body.readSlice(length: 32) != nil,
            let sessionLength = body.readInteger(as: UInt8.self), body.readSlice(length: Int(sessionLength)) != nil,
            let suitesLength = body.readInteger(as: UInt16.self), body.readSlice(length: Int(suitesLength)) != nil,
            let compressionLength = body.readInteger(as: UInt8.self), body.readSlice(length: Int(compressionLength)) != nil
        else { return nil }
        var hello = TLSHello()
        forEachExtension(&body) { type, data in
            if type == 16 {
                hello.alpn = protocolNames(&data)
                return
            }
            // server_name: a list of (type 0 = host_name, name).
            guard type == 0, data.readInteger(as: UInt16.self) != nil, data.readInteger(as: UInt8.self) == 0,
                let length = data.readInteger(as: UInt16.self), let name = data.readString(length: Int(length))
            else { return }
            hello.sni = name.lowercased()
        }
        return hello
    }

    /// application_layer_protocol_negotiation: a list of length-prefixed names.
    private static func protocolNames(_ data: inout ByteBuffer) -> [String]? {
        guard let total = data.readInteger(as: UInt16.self), var list = data.readSlice(length: Int(total)) else { return nil }
        var names: [String] = []
        while let length = list.readInteger(as: UInt8.self), let name = list.readString(length: Int(length)) { names.append(name) }
        return names
    }

    private static func serverHello(_ body: inout ByteBuffer) -> TLSHello? {
        guard let legacy = body.readInteger(as: UInt16.self), body.readSlice(length: 32) != nil,
            let sessionLength = body.readInteger(as: UInt8.self), body.readSlice(length: Int(sessionLength)) != nil,
            let suite = body.readInteger(as: UInt16.self), body.readInteger(as: UInt8.self) != nil
        else { return nil }
        var version = legacy
        forEachExtension(&body) { type, data in
            // supported_versions: TLS 1.3 says so here, not in the header.
            if type == 43, let selected = data.readInteger(as: UInt16.self) { version = selected }
        }
        return TLSHello(sni: nil, version: versionName(version), cipher: cipherName(suite))
    }

    private static func forEachExtension(_ body: inout ByteBuffer, _ visit: (UInt16, inout ByteBuffer) -> Void) {
        guard let total = body.readInteger(as: UInt16.self), var extensions = body.readSlice(length: Int(total)) else { return }
        while let type = extensions.readInteger(as: UInt16.self), let length = extensions.readInteger(as: UInt16.self),
            var data = extensions.readSlice(length: Int(length))
        {
            visit(type, &data)
        }
    }

    static func versionName(_ code: UInt16) -> String {
        switch code {
        case 0x0301: "TLSv1.0"
        case 0x0302: "TLSv1.1"
        case 0x0303: "TLSv1.2"
        case 0x0304: "TLSv1.3"
        default: hex(code)
        }
    }

    /// IANA names of the suites servers pick today; others as hex.
    static func cipherName(_ code: UInt16) -> String {
        let names: [UInt16: String] = [
            0x1301: "TLS_AES_128_GCM_SHA256", 0x1302: "TLS_AES_256_GCM_SHA384", 0x1303: "TLS_CHACHA20_POLY1305_SHA256",
            0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            0xC009: "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC00A: "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
            0xC013: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC014: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
            0x009C: "TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009D: "TLS_RSA_WITH_AES_256_GCM_SHA384",
            0x002F: "TLS_RSA_WITH_AES_128_CBC_SHA", 0x0035: "TLS_RSA_WITH_AES_256_CBC_SHA",
        ]
        return names[code] ?? hex(code)
    }

    private static func hex(_ code: UInt16) -> String {
        let digits = String(code, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
