import NIOCore
import Testing

@testable import ProxyEngine

/// Only a whole request line's target is touched, and only its bytes outside ASCII.
@Suite struct RequestTargetEncoderTests {
    private func encode(_ text: String) -> (text: String, target: String)? {
        RequestTargetEncoder.encode(ByteBuffer(string: text)).map { (String(buffer: $0.buffer), $0.target) }
    }

    @Test func rawUTF8InATargetIsPercentEncoded() {
        let r = encode("GET http://a.test/caf\u{e9}?q=\u{fc} HTTP/1.1\r\nHost: a.test\r\nX-Name: caf\u{e9}\r\n\r\nbody \u{e9}")
        #expect(r?.text == "GET http://a.test/caf%C3%A9?q=%C3%BC HTTP/1.1\r\nHost: a.test\r\nX-Name: caf\u{e9}\r\n\r\nbody \u{e9}")
        #expect(r?.target == "http://a.test/caf%C3%A9?q=%C3%BC")
        #expect(encode("\r\nPUT /\u{65e5} HTTP/1.0\n")?.text == "\r\nPUT /%E6%97%A5 HTTP/1.0\n")
    }

    @Test func anythingElseIsLeftAlone() {
        for text in [
            "GET /caf%C3%A9 HTTP/1.1\r\n\r\n",  // nothing to encode
            "X-Name: caf\u{e9} HTTP/1.1\r\n",  // not a method
            "get /caf\u{e9} HTTP/1.1\r\n",  // not a method either
            "GET /caf\u{e9} HTTP/1.1",  // the line is not whole yet
            "GET /caf\u{e9}",  // nor here
            "GET /caf\u{e9} x HTTP/1.1\r\n",  // a space in the target
            "GET /caf\u{e9} HTTP/2.0\r\n",  // not HTTP/1
            "\u{e9} HTTP/1.1\r\n",
        ] {  // the rest of a split line
            #expect(encode(text) == nil, "\(text)")
        }
    }

    @Test func onlyTheStartOfARequestLineIsHeldForItsEnd() {
        func held(_ text: String) -> Bool { RequestTargetEncoder.awaitsRestOfLine(ByteBuffer(string: text)) }
        for text in ["G", "GET", "GET ", "GET /caf\u{e9}", "GET /x HTTP/1.", "GET /x HTTP/1.1", "GET /x HTTP/1.1\r", "\r\r"] {
            #expect(held(text), "\(text)")
        }
        for text in [
            "", "GET /x HTTP/1.1\r\n", "get /x", "GET  /x", "GET /x HTTP/2", "GET /x HTTP/1.1 x", "GET /a\u{1}b",
            "\u{16}\u{3}\u{1}", "/path-continued", "X-Name: v",
        ] {
            #expect(!held(text), "\(text)")
        }
    }
}
