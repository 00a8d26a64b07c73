import Foundation
import NIOCore

/// How the dial of a SOCKS5 CONNECT ends: answered at once or once all the
/// client's bytes are in; opened (bound to a v4 or v6 address) or failed
/// with an error whose reply code RFC 1928 names.
struct DialOutcome {
    enum End {
        case opened(bound: SocketAddress)
        case failed(Error, reply: UInt8)
    }

    var end: End
    var atOnce: Bool

    /// The reply's BND.ADDR and BND.PORT for an opened dial, ATYP first.
    var boundBytes: [UInt8]? {
        guard case let .opened(bound) = end else { return nil }
        switch bound {
        case .v4: return [0x01, 10, 9, 8, 7, 0x10, 0xE1]
        default: return [0x04, 0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [0x07, 0xFF, 0xFF]
        }
    }

    struct Other: Error {}

    static func pick(_ n: Int) -> DialOutcome {
        let ends: [End] = [
            .opened(bound: Self.address("10.9.8.7", 4321)),
            .opened(bound: Self.address("2001:db8::7", 65535)),
            .failed(IOError(errnoCode: ECONNREFUSED, reason: "connect"), reply: 0x05),
            .failed(IOError(errnoCode: ENETUNREACH, reason: "connect"), reply: 0x03),
            .failed(IOError(errnoCode: EHOSTUNREACH, reason: "connect"), reply: 0x04),
            .failed(IOError(errnoCode: ETIMEDOUT, reason: "connect"), reply: 0x04),
            .failed(Other(), reply: 0x01),
        ]
        return DialOutcome(end: ends[n % ends.count], atOnce: (n / ends.count) % 2 == 0)
    }

    static func address(_ ip: String, _ port: Int) -> SocketAddress {
        guard let address = try? SocketAddress(ipAddress: ip, port: port) else { preconditionFailure("the harness's own address \(ip)") }
        return address
    }
}
