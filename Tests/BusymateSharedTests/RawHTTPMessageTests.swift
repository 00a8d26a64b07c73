import Testing

@testable import BusymateShared

@Suite struct RawHTTPMessageTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func parsesWhatItRendersAndWhatAnEditorSaves() throws {
        let crlf = try RawHTTPMessage.parse(
            bytes("POST http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-Two:  spaced  \r\n\r\nbody\r\nline"), as: .request)
        #expect(crlf.start == .request(method: "POST", target: "http://a.test/x?y=1", version: "HTTP/1.1"))
        #expect(crlf.headers.map(\.name) == ["Host", "X-Two"] && crlf.headers.map(\.value) == ["a.test", "spaced"])
        // The body is kept byte for byte, CRLFs in it included.
        #expect(crlf.body == bytes("body\r\nline"))
        #expect(try RawHTTPMessage.parse(crlf.rendered(), as: .request) == crlf)
        // Bare LF line ends (vi on a copy, a heredoc) read the same.
        let lf = try RawHTTPMessage.parse(
            bytes("POST http://a.test/x?y=1 HTTP/1.1\nHost: a.test\nX-Two: spaced\n\nbody\r\nline"), as: .request)
        #expect(lf == crlf)
        // No blank line: all head, no body.
        let headOnly = try RawHTTPMessage.parse(bytes("GET / HTTP/1.1\nHost: a\n"), as: .request)
        #expect(headOnly.body.isEmpty && headOnly.headers.count == 1)
        let response = try RawHTTPMessage.parse(bytes("HTTP/1.1 418 I'm a teapot\r\n\r\n"), as: .response)
        #expect(response.start == .response(version: "HTTP/1.1", status: 418, reason: "I'm a teapot"))
        #expect(
            try RawHTTPMessage.parse(bytes("HTTP/1.0 204\r\n\r\n"), as: .response).start
                == .response(version: "HTTP/1.0", status: 204, reason: ""))
    }

    /// (text, kind, words the error has)
    static let malformed: [(String, RawHTTPMessage.Kind, String)] = [
        ("", .request, "line 1"),
        ("GET /\r\n\r\n", .request, "not a request line"),
        ("GET / HTTP/2\r\n\r\n", .request, "not HTTP/1.0 or HTTP/1.1"),
        ("G(T / HTTP/1.1\r\n\r\n", .request, "not a request line"),
        ("GET / HTTP/1.1\r\nno colon here\r\n\r\n", .request, "line 2: \"no colon here\" is not \"Name: value\""),
        ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", .request, "line 2: \"Bad Name\" is not a valid header name"),
        ("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", .request, "line 3: folded"),
        ("GET / HTTP/1.1\r\nA: b\u{1}c\r\n\r\n", .request, "control characters"),
        // What goes on the wire as it is (found by fuzz-raw-http).
        ("GET /a?\u{2}b HTTP/1.1\r\n\r\n", .request, "line 1: the target holds control characters"),
        ("GET /a\tb HTTP/1.1\r\n\r\n", .request, "line 1: the target holds control characters"),
        ("HTTP/1.1 2000 OK\r\n\r\n", .response, "three-digit status"),
        ("HTTP/1.1 abc OK\r\n\r\n", .response, "three-digit status"),
        ("GET / HTTP/1.1\r\n\r\n", .response, "not a status line"),
    ]

    @Test(arguments: malformed) func refusesMalformedMessagesSayingWhere(text: String, kind: RawHTTPMessage.Kind, words: String) {
        #expect {
            _ = try RawHTTPMessage.parse(bytes(text), as: kind)
        } throws: { error in
            "\(error)".contains(words)
        }
    }

    @Test func framingFollowsTheBody() throws {
        // Content-Length fixed up where it stood; Transfer-Encoding goes (bodies are whole).
        var edited = try RawHTTPMessage.parse(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX: y\r\n\r\nlonger"), as: .request)
        edited.frame(bodyless: false)
        #expect(edited.headers.map(\.name) == ["Host", "Content-Length", "X"] && edited.values("content-length") == ["6"])
        var chunked = try RawHTTPMessage.parse(
            bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\nabc"), as: .response)
        chunked.frame(bodyless: false)
        #expect(chunked.values("transfer-encoding").isEmpty && chunked.values("content-length") == ["3"])
        // A GET with no body and no framing stays so; a body added gets a length.
        var get = try RawHTTPMessage.parse(bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), as: .request)
        get.frame(bodyless: false)
        #expect(get.values("content-length").isEmpty)
        get.body = bytes("x")
        get.frame(bodyless: false)
        #expect(get.values("content-length") == ["1"])
        // A response always says its length; a HEAD answer keeps the entity's and sends no body.
        var empty = try RawHTTPMessage.parse(bytes("HTTP/1.1 200 OK\r\n\r\n"), as: .response)
        empty.frame(bodyless: false)
        #expect(empty.values("content-length") == ["0"])
        var head = try RawHTTPMessage.parse(bytes("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nstray"), as: .response)
        head.frame(bodyless: true)
        #expect(head.values("content-length") == ["99"] && head.body.isEmpty)
    }

    @Test func anEditMustStayTheSameKindOfMessage() throws {
        let proxied = try RawHTTPMessage.parse(bytes("GET http://a.test/ HTTP/1.1\r\n\r\n"), as: .request)
        let tunnelled = try RawHTTPMessage.parse(bytes("GET /x HTTP/1.1\r\n\r\n"), as: .request)
        let response = try RawHTTPMessage.parse(bytes("HTTP/1.1 200 OK\r\n\r\n"), as: .response)
        try RawHTTPMessage.parse(bytes("PUT http://b.test/y HTTP/1.1\r\n\r\n"), as: .request).checkEditable(replacing: proxied)
        try RawHTTPMessage.parse(bytes("GET /y HTTP/1.1\r\n\r\n"), as: .request).checkEditable(replacing: tunnelled)
        try RawHTTPMessage.parse(bytes("HTTP/1.1 500 Boom\r\n\r\n"), as: .response).checkEditable(replacing: response)
        #expect(throws: RawHTTPMessage.ParseError.self) {
            try RawHTTPMessage.parse(bytes("GET /y HTTP/1.1\r\n\r\n"), as: .request).checkEditable(replacing: proxied)
        }
        #expect(throws: RawHTTPMessage.ParseError.self) {
            try RawHTTPMessage.parse(bytes("GET http://b.test/ HTTP/1.1\r\n\r\n"), as: .request).checkEditable(replacing: tunnelled)
        }
        #expect(throws: RawHTTPMessage.ParseError.self) {
            try RawHTTPMessage.parse(bytes("HTTP/1.1 100 Continue\r\n\r\n"), as: .response).checkEditable(replacing: response)
        }
        // An edited reason phrase goes to the client as it is (found by fuzz-raw-http).
        #expect(throws: RawHTTPMessage.ParseError.self) {
            try RawHTTPMessage.parse(bytes("HTTP/1.1 418 I'm a teapo\u{1}t\r\n\r\n"), as: .response).checkEditable(replacing: response)
        }
        try RawHTTPMessage.parse(bytes("HTTP/1.1 418 I'm\ta teapot\r\n\r\n"), as: .response).checkEditable(replacing: response)
    }
}
