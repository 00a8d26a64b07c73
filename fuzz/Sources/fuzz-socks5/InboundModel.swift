/// What RFC 1928 (and Busymate's choices where it is silent) says a SOCKS5
/// server does with a client's bytes, all of them at hand: written apart
/// from SOCKS5Message, byte by byte, for the harness to hold the handler to.
enum InboundModel: Equatable {
    /// The greeting is not whole: nothing answered yet.
    case awaitingGreeting
    /// Not a greeting (no method offered): closed unanswered.
    case badGreeting
    /// No "no authentication" among the methods: 05 FF, closed.
    case noAcceptableMethod
    /// 05 00 answered; the request is not whole.
    case awaitingRequest
    /// 05 00 answered, the request refused: with this reply code, or closed unanswered.
    case refused(UInt8?)
    /// 05 00 answered; a CONNECT to this address (as encoded) and port, `length` bytes in all.
    case connect(Address, port: Int, length: Int)

    enum Address: Equatable {
        case ipv4([UInt8])
        case ipv6([UInt8])
        case name([UInt8])
    }

    /// What a host name may hold: printable ASCII but URL syntax (Busymate's choice).
    static func nameByte(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) && !"/@[]?#:\\".utf8.contains(byte)
    }

    init(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else {
            self = .awaitingGreeting
            return
        }
        let methods = Int(bytes[1])
        guard methods > 0 else {
            self = .badGreeting
            return
        }
        guard bytes.count >= 2 + methods else {
            self = .awaitingGreeting
            return
        }
        guard bytes[2..<(2 + methods)].contains(0x00) else {
            self = .noAcceptableMethod
            return
        }
        self = Self.request(Array(bytes[(2 + methods)...]), after: 2 + methods)
    }

    /// §4: VER CMD RSV ATYP DST.ADDR DST.PORT.
    private static func request(_ r: [UInt8], after greeting: Int) -> InboundModel {
        if let version = r.first, version != 0x05 { return .refused(nil) }
        guard r.count >= 4 else { return .awaitingRequest }
        guard r[1] == 0x01 else { return .refused(0x07) }
        let start: Int
        let count: Int
        switch r[3] {
        case 0x01: (start, count) = (4, 4)
        case 0x04: (start, count) = (4, 16)
        case 0x03:
            guard r.count >= 5 else { return .awaitingRequest }
            (start, count) = (5, Int(r[4]))
            guard count > 0 else { return .refused(0x01) }
        default: return .refused(0x08)
        }
        guard r.count >= start + count + 2 else { return .awaitingRequest }
        let address = Array(r[start..<(start + count)])
        let port = Int(r[start + count]) * 256 + Int(r[start + count + 1])
        guard port != 0 else { return .refused(0x01) }
        let length = greeting + start + count + 2
        switch r[3] {
        case 0x01: return .connect(.ipv4(address), port: port, length: length)
        case 0x04: return .connect(.ipv6(address), port: port, length: length)
        default:
            guard address.allSatisfy(nameByte) else { return .refused(0x01) }
            return .connect(.name(address), port: port, length: length)
        }
    }

    /// Whether the method selection 05 00 was answered.
    var accepted: Bool {
        switch self {
        case .awaitingGreeting, .badGreeting, .noAcceptableMethod: return false
        case .awaitingRequest, .refused, .connect: return true
        }
    }
}
