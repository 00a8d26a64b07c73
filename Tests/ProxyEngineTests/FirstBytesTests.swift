import NIOCore
import Testing

@testable import ProxyEngine

/// What a connection's first bytes are, on its own: the router's only
/// guess at a protocol.
@Suite struct FirstBytesTests {
    static func classify(_ bytes: [UInt8], h2c: Bool = true, insideConnect: Bool = false) -> FirstBytes? {
        FirstBytes.classify(ByteBuffer(bytes: bytes), allowH2C: h2c, insideConnect: insideConnect)
    }

    static func classify(_ text: String, h2c: Bool = true, insideConnect: Bool = false) -> FirstBytes? {
        classify(Array(text.utf8), h2c: h2c, insideConnect: insideConnect)
    }

    @Test func nothingYetSaysNothing() {
        #expect(Self.classify([]) == nil)
        #expect(Self.classify([], insideConnect: true) == nil)
    }

    @Test func aClientHelloSaysTLSAndItsNameOnceWhole() throws {
        let hello = Array(try ConnectionRouterTests.clientHello(sni: "example.com").readableBytesView)
        #expect(Self.classify(hello) == .tls(sni: "example.com"))
        #expect(Self.classify(Array(hello.prefix(hello.count / 2))) == nil, "half a hello waits")
        #expect(Self.classify(Array(try ConnectionRouterTests.clientHello(sni: nil).readableBytesView)) == .tls(sni: nil))
    }

    @Test func aTLSRecordThatIsNoHelloOrTooLargeIsOpaque() {
        // A handshake record whose message is no ClientHello (a ServerHello).
        #expect(Self.classify([0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]) == .opaque)
        // A hello that claims more than the peek limit, still incomplete at the limit.
        var huge: [UInt8] = [0x16, 0x03, 0x01, 0xFF, 0xFF, 0x01, 0x00, 0xFF, 0xFB]
        huge += [UInt8](repeating: 0, count: FirstBytes.peekLimit)
        #expect(Self.classify(huge) == .opaque)
    }

    @Test func anUpperCaseMethodAndASpaceSayHTTP() {
        #expect(Self.classify("GE") == nil)
        #expect(Self.classify("GET ") == .http)
        #expect(Self.classify("PROPFIND /x HTTP/1.1") == .http)
        #expect(Self.classify("get / HTTP/1.1") == .opaque)
        #expect(Self.classify(" GET") == .opaque)
        #expect(Self.classify(String(repeating: "A", count: 30)) == .opaque)
        #expect(Self.classify([0x00, 0x01]) == .opaque)
    }

    @Test func h2csPrefaceSaysH2COnlyWhenAllowed() {
        let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        #expect(Self.classify(preface) == .h2c)
        #expect(Self.classify("PRI * HT") == nil, "part of the preface waits")
        #expect(Self.classify(preface, h2c: false) == .http, "with proxy.http2 off, PRI is a method")
        #expect(Self.classify("POST / HTTP/1.1") == .http)
    }

    @Test func insideAConnectTheFirstByteIsEnoughAndPlaintextIsHTTP() {
        #expect(Self.classify([0x16], insideConnect: true) == .tls(sni: nil))
        #expect(Self.classify("GE", insideConnect: true) == .http)
        #expect(Self.classify([0x00, 0xff], insideConnect: true) == .http, "the HTTP layer answers what does not parse")
        #expect(Self.classify("PR", insideConnect: true) == nil)
        #expect(Self.classify("PR", h2c: false, insideConnect: true) == .http)
        #expect(Self.classify("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", insideConnect: true) == .h2c)
    }
}
