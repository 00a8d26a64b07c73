import NIOCore
import Testing

@testable import ProxyEngine

/// SOCKS5's parser takes whatever a client sends: a prefix waits for more,
/// anything else is parsed or refused with why, and nothing traps.
struct SOCKS5MessageTests {
    @Test func everyPrefixOfARequestWaitsAndTheWholeParses() {
        let name = Array("example.com".utf8)
        let request: [UInt8] = [5, 1, 0, 3, UInt8(name.count)] + name + [0x01, 0xBB]
        for length in 0..<request.count {
            #expect(SOCKS5Message.request(ByteBuffer(bytes: request.prefix(length))) == .incomplete, "\(length)")
        }
        #expect(
            SOCKS5Message.request(ByteBuffer(bytes: request))
                == .connect(ProxyTarget(host: "example.com", port: 443), addressType: 3, length: request.count))
        let v6: [UInt8] = [5, 1, 0, 4] + [UInt8](repeating: 0, count: 15) + [1, 0, 80]
        #expect(
            SOCKS5Message.request(ByteBuffer(bytes: v6)) == .connect(ProxyTarget(host: "::1", port: 80), addressType: 4, length: v6.count))
        #expect(SOCKS5Message.greeting(ByteBuffer(bytes: [5, 2, 2])) == .incomplete)
        #expect(SOCKS5Message.greeting(ByteBuffer(bytes: [5, 2, 2, 0, 9])) == .methods([2, 0], length: 4))
    }

    @Test func hostileRequestsAreRefusedWithTheRightReply() {
        func reply(_ bytes: [UInt8]) -> SOCKS5Message.Reply? {
            if case let .invalid(_, reply) = SOCKS5Message.request(ByteBuffer(bytes: bytes)) { return reply }
            return nil
        }
        #expect(reply([5, 2, 0, 1, 127, 0, 0, 1, 0, 80]) == .commandNotSupported)
        #expect(reply([5, 1, 0, 9, 0, 0]) == .addressTypeNotSupported)
        #expect(reply([5, 1, 0, 3, 0, 0, 80]) == .generalFailure)
        #expect(reply([5, 1, 0, 3, 3, 0x61, 0x3A, 0x62, 0, 80]) == .generalFailure, "a colon in a name")
        #expect(reply([5, 1, 0, 1, 127, 0, 0, 1, 0, 0]) == .generalFailure, "port 0")
        #expect(SOCKS5Message.request(ByteBuffer(bytes: [4, 1, 0, 1])) == .invalid("not SOCKS5 (version byte 4)", reply: nil))
    }

    @Test func randomBytesNeverTrap() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let count = Int.random(in: 0...300, using: &generator)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if !bytes.isEmpty, Bool.random(using: &generator) { bytes[0] = 5 }
            _ = SOCKS5Message.greeting(ByteBuffer(bytes: bytes))
            _ = SOCKS5Message.request(ByteBuffer(bytes: bytes))
        }
    }
}
