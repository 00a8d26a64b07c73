import Foundation
import NIOCore
import NIOPosix

/// SOCKS5's wire format (RFC 1928), parsed from what has arrived so far.
/// Every length is read before it is trusted: a short read is
/// `incomplete`, anything else wrong is `invalid` with why.
enum SOCKS5Message {
    static let version: UInt8 = 0x05
    /// The one method we offer: no authentication.
    static let noAuthentication: UInt8 = 0x00
    static let noAcceptableMethods: UInt8 = 0xFF

    /// §6's reply codes.
    enum Reply: UInt8 {
        case succeeded = 0x00
        case generalFailure = 0x01
        case notAllowed = 0x02
        case networkUnreachable = 0x03
        case hostUnreachable = 0x04
        case connectionRefused = 0x05
        case ttlExpired = 0x06
        case commandNotSupported = 0x07
        case addressTypeNotSupported = 0x08

        /// RFC 1928's words for it.
        var text: String {
            switch self {
            case .succeeded: "succeeded"
            case .generalFailure: "general SOCKS server failure"
            case .notAllowed: "connection not allowed by ruleset"
            case .networkUnreachable: "network unreachable"
            case .hostUnreachable: "host unreachable"
            case .connectionRefused: "connection refused"
            case .ttlExpired: "TTL expired"
            case .commandNotSupported: "command not supported"
            case .addressTypeNotSupported: "address type not supported"
            }
        }
    }

    enum Greeting: Equatable {
        case incomplete
        case invalid(String)
        /// The methods the client offers, and the greeting's length.
        case methods([UInt8], length: Int)
    }

    enum Request: Equatable {
        case incomplete
        /// Refused with `reply` (when the request got far enough to answer).
        case invalid(String, reply: Reply?)
        /// A CONNECT to `target`, and the request's length.
        case connect(ProxyTarget, addressType: UInt8, length: Int)
    }

    /// §3: VER NMETHODS METHODS...
    static func greeting(_ bytes: ByteBuffer) -> Greeting {
        let view = bytes.readableBytesView
        guard let ver = view.first else { return .incomplete }
        guard ver == version else { return .invalid("not SOCKS5 (version byte \(ver))") }
        guard view.count >= 2 else { return .incomplete }
        let count = Int(view[view.startIndex + 1])
        guard count > 0 else { return .invalid("the greeting offers no authentication method") }
        guard view.count >= 2 + count else { return .incomplete }
        return .methods(Array(view[(view.startIndex + 2)..<(view.startIndex + 2 + count)]), length: 2 + count)
    }

    /// §4: VER CMD RSV ATYP DST.ADDR DST.PORT
    static func request(_ bytes: ByteBuffer) -> Request {
        let view = bytes.readableBytesView
        let start = view.startIndex
        guard view.count >= 4 else {
            if let ver = view.first, ver != version { return .invalid("not SOCKS5 (version byte \(ver))", reply: nil) }
            return .incomplete
        }
        let (ver, cmd, atyp) = (view[start], view[start + 1], view[start + 3])
        guard ver == version else { return .invalid("not SOCKS5 (version byte \(ver))", reply: nil) }
        guard cmd == 0x01 else {
            let name = [0x02: "BIND", 0x03: "UDP ASSOCIATE"][Int(cmd)] ?? "command \(cmd)"
            return .invalid("\(name) is not supported (CONNECT only)", reply: .commandNotSupported)
        }
        let addressLength: Int
        let addressStart: Int
        switch atyp {
        case 0x01: (addressStart, addressLength) = (4, 4)
        case 0x04: (addressStart, addressLength) = (4, 16)
        case 0x03:
            guard view.count >= 5 else { return .incomplete }
            (addressStart, addressLength) = (5, Int(view[start + 4]))
            guard addressLength > 0 else { return .invalid("an empty domain name", reply: .generalFailure) }
        default:
            return .invalid("address type \(atyp) is not supported", reply: .addressTypeNotSupported)
        }
        let length = addressStart + addressLength + 2
        guard view.count >= length else { return .incomplete }
        let address = view[(start + addressStart)..<(start + addressStart + addressLength)]
        let port = Int(view[start + addressStart + addressLength]) << 8 | Int(view[start + addressStart + addressLength + 1])
        guard port > 0 else { return .invalid("port 0", reply: .generalFailure) }
        let host: String
        if atyp == 0x03 {
            // A host name: printable ASCII, no space, nothing that reads as URL syntax.
            guard address.allSatisfy({ (0x21...0x7E).contains($0) && !"/@[]?#:\\".utf8.contains($0) }) else {
                return .invalid("a domain name with bytes no host name has", reply: .generalFailure)
            }
            host = String(decoding: address, as: UTF8.self).lowercased()
        } else {
            guard let parsed = try? SocketAddress(packedIPAddress: ByteBuffer(bytes: address), port: port), let ip = parsed.ipAddress else {
                return .invalid("an address that does not parse", reply: .generalFailure)
            }
            host = DeviceRegistry.normalized(ip)
        }
        return .connect(ProxyTarget(host: host, port: port), addressType: atyp, length: length)
    }

    /// §6: VER REP RSV ATYP BND.ADDR BND.PORT, the bound address when known (else 0.0.0.0:0).
    static func reply(_ code: Reply, bound: SocketAddress?) -> ByteBuffer {
        var out = ByteBuffer(bytes: [version, code.rawValue, 0x00])
        switch bound {
        case let .v4(address)?:
            out.writeInteger(UInt8(0x01))
            _ = withUnsafeBytes(of: address.address.sin_addr) { out.writeBytes($0) }
            out.writeInteger(UInt16(bound?.port ?? 0))
        case let .v6(address)?:
            out.writeInteger(UInt8(0x04))
            _ = withUnsafeBytes(of: address.address.sin6_addr) { out.writeBytes($0) }
            out.writeInteger(UInt16(bound?.port ?? 0))
        default:
            out.writeBytes([0x01, 0, 0, 0, 0, 0, 0])
        }
        return out
    }

    /// The reply a failed dial earns: refused, unreachable, or general.
    static func reply(for error: Error) -> Reply {
        if let io = error as? IOError {
            switch io.errnoCode {
            case ECONNREFUSED: return .connectionRefused
            case ENETUNREACH: return .networkUnreachable
            case EHOSTUNREACH, ETIMEDOUT: return .hostUnreachable
            default: return .generalFailure
            }
        }
        if let nio = error as? NIOConnectionError {
            if let first = nio.connectionErrors.first { return reply(for: first.error) }
            // No address to try: the name did not resolve.
            return nio.dnsAError is SelfLoopError || nio.dnsAAAAError is SelfLoopError ? .notAllowed : .hostUnreachable
        }
        if let channel = error as? ChannelError, case .connectTimeout = channel { return .hostUnreachable }
        return .generalFailure
    }
}
