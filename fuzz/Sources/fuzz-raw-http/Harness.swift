// A message edited at a breakpoint (RawHTTPMessage): the text a person
// saves is parsed as a request and as a response, framed, checked against
// the held original, and turned into the head the tunnel sends on
// (HeldMessage's requestHead / responseHead).
//
// Properties:
// - rendered() parses back to the same message (the editor's round trip);
// - frame(bodyless:) leaves one Content-Length equal to the body's size
//   and no Transfer-Encoding (a bodyless message: no body, headers kept),
//   and framing twice changes nothing;
// - the head the tunnel builds from an accepted edit (HeldMessage's
//   requestHead, origin-form as HTTPExchangeHandler sends it; responseHead),
//   written by NIO's encoder, parses back (NIO's decoder) to the same start
//   line and headers: an accepted edit cannot put a different message on
//   the wire.
import BusymateShared
import FuzzSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1

@testable import ProxyEngine

/// Held originals an edit must be able to replace.
let originals: [RawHTTPMessage] = [
    RawHTTPMessage(
        start: .request(method: "GET", target: "http://example.com/a", version: "HTTP/1.1"), headers: [("Host", "example.com")], body: []),
    RawHTTPMessage(
        start: .request(method: "POST", target: "/api", version: "HTTP/1.1"), headers: [("Host", "example.com")], body: Array("x".utf8)),
    RawHTTPMessage(start: .response(version: "HTTP/1.1", status: 200, reason: "OK"), headers: [("Content-Length", "0")], body: []),
]

func describe(_ m: RawHTTPMessage) -> String { Fuzz.show(String(decoding: m.rendered(), as: UTF8.self)) }

func checkFraming(_ message: RawHTTPMessage, bodyless: Bool) {
    var framed = message
    framed.frame(bodyless: bodyless)
    let lengths = framed.values("content-length")
    if bodyless {
        // A HEAD's, 204's or 304's headers describe a body not sent: kept as they are.
        Fuzz.check(
            framed.body.isEmpty && framed.headers.map { [$0.name, $0.value] } == message.headers.map { [$0.name, $0.value] },
            "bodyless framing kept a body or changed headers: \(describe(framed))")
    } else {
        Fuzz.check(framed.values("transfer-encoding").isEmpty, "framed message keeps Transfer-Encoding: \(describe(framed))")
        Fuzz.check(lengths.count <= 1, "framed message has \(lengths.count) Content-Length headers")
        if let length = lengths.first {
            Fuzz.check(length == "\(framed.body.count)", "Content-Length \(length) for \(framed.body.count) bytes")
        }
        if framed.kind == .response || !framed.body.isEmpty {
            Fuzz.check(lengths.count == 1, "framed message without Content-Length: \(describe(framed))")
        }
    }
    var twice = framed
    twice.frame(bodyless: bodyless)
    Fuzz.check(twice == framed, "framing is not stable: \(describe(framed)) then \(describe(twice))")
    let reparsed = try? RawHTTPMessage.parse(framed.rendered(), as: framed.kind)
    Fuzz.check(reparsed == framed, "framed message does not parse back: \(describe(framed))")
}

/// The head the tunnel would send, through NIO's encoder and decoder.
func checkWire(_ message: RawHTTPMessage) {
    var wire = ByteBuffer()
    if var head = message.requestHead {
        // What HTTPExchangeHandler sends: the origin-form of an absolute
        // target (one that names no usable host is refused, not sent).
        if head.uri.lowercased().hasPrefix("http://") {
            guard let (_, originForm) = ProxyTarget.parseAbsoluteForm(head.uri) else { return }
            head.uri = originForm
        }
        // Raw UTF-8 in a target is sent as typed (RFC 9112 wants it
        // percent-encoded; many servers take it, NIO's parser does not).
        guard head.uri.utf8.allSatisfy({ $0 < 0x80 }) else { return }
        let encoder = EmbeddedChannel(handler: HTTPRequestEncoder())
        defer { _ = try? encoder.finish(acceptAlreadyClosed: true) }
        _ = try? encoder.writeOutbound(HTTPClientRequestPart.head(head))
        _ = try? encoder.writeOutbound(HTTPClientRequestPart.end(nil))
        while var chunk = try? encoder.readOutbound(as: ByteBuffer.self) { wire.writeBuffer(&chunk) }
        let text = Fuzz.show(String(decoding: wire.readableBytesView, as: UTF8.self))
        let decoder = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
        defer { _ = try? decoder.finish(acceptAlreadyClosed: true) }
        do {
            try decoder.writeInbound(wire)
        } catch HTTPParserError.invalidMethod {
            // llhttp knows a fixed list of methods; servers may know others.
            return
        } catch {
            Fuzz.check(false, "an accepted request edit goes out malformed (\(error)): \(text)")
        }
        guard case let .head(parsed)? = try? decoder.readInbound(as: HTTPServerRequestPart.self) else {
            Fuzz.check(false, "an accepted request edit goes out without a head: \(text)")
            return
        }
        Fuzz.check(
            parsed.method == head.method && parsed.uri == head.uri,
            "request line reads back as \(parsed.method) \(Fuzz.show(parsed.uri)): \(text)")
        // Upstream, the encoder sets the framing headers itself.
        func unframed(_ headers: HTTPHeaders) -> [String] {
            headers.filter { !["content-length", "transfer-encoding"].contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" }
        }
        Fuzz.check(unframed(parsed.headers) == unframed(head.headers), "headers read back as \(parsed.headers): \(text)")
    } else if let head = message.responseHead {
        // The response goes to the client through HTTPResponseEncoder; the
        // client reads it with a response decoder.
        let encoder = EmbeddedChannel(
            handler: HTTPResponseEncoder(
                configuration: {
                    var c = HTTPResponseEncoder.Configuration()
                    c.automaticallySetFramingHeaders = false
                    return c
                }()))
        defer { _ = try? encoder.finish(acceptAlreadyClosed: true) }
        _ = try? encoder.writeOutbound(HTTPServerResponsePart.head(head))
        _ = try? encoder.writeOutbound(HTTPServerResponsePart.end(nil))
        while var chunk = try? encoder.readOutbound(as: ByteBuffer.self) { wire.writeBuffer(&chunk) }
        let text = Fuzz.show(String(decoding: wire.readableBytesView, as: UTF8.self))
        let decoder = EmbeddedChannel()
        defer { _ = try? decoder.finish(acceptAlreadyClosed: true) }
        _ = try? decoder.pipeline.syncOperations.addHTTPClientHandlers()
        // The decoder answers a request: send one first.
        _ = try? decoder.writeOutbound(HTTPClientRequestPart.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: "/")))
        _ = try? decoder.writeOutbound(HTTPClientRequestPart.end(nil))
        do {
            try decoder.writeInbound(wire)
        } catch {
            Fuzz.check(false, "an accepted response edit goes out malformed (\(error)): \(text)")
        }
        guard case let .head(parsed)? = try? decoder.readInbound(as: HTTPClientResponsePart.self) else {
            Fuzz.check(false, "an accepted response edit goes out without a head: \(text)")
            return
        }
        // NIO's decoder names known codes its own way: compare the line itself.
        let statusLine = wire.readableBytesView.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        Fuzz.check(
            parsed.status.code == head.status.code
                && Array(statusLine) == Array("HTTP/1.1 \(head.status.code) \(head.status.reasonPhrase)".utf8),
            "status line reads back as \(parsed.status.code) \(Fuzz.show(parsed.status.reasonPhrase)): \(text)")
        Fuzz.check(
            !head.status.reasonPhrase.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F },
            "an accepted response edit has control characters in its reason phrase: \(text)")
        Fuzz.check(
            parsed.headers.map { "\($0.name): \($0.value)" } == head.headers.map { "\($0.name): \($0.value)" },
            "headers read back as \(parsed.headers): \(text)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        for kind in [RawHTTPMessage.Kind.request, .response] {
            guard let message = try? RawHTTPMessage.parse(bytes, as: kind) else { continue }
            Fuzz.check(message.kind == kind, "parsed as \(kind), came out a \(message.kind)")
            let again = try? RawHTTPMessage.parse(message.rendered(), as: kind)
            Fuzz.check(again == message, "rendered message does not parse back: \(describe(message))")
            _ = message.isBodylessStatus
            checkFraming(message, bodyless: false)
            checkFraming(message, bodyless: true)
            var accepted = false
            for original in originals where (try? message.checkEditable(replacing: original)) != nil {
                accepted = true
            }
            if accepted {
                var framed = message
                framed.frame(bodyless: false)
                checkWire(framed)
            }
        }
    }
}
