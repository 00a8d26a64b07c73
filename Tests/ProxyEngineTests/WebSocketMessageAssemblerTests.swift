import CompressNIO
import NIOCore
import NIOHTTP1
import NIOWebSocket
import Testing

@testable import ProxyEngine

/// Frames read into messages, one direction at a time: fragments, control
/// frames between them, what RFC 6455 and 7692 forbid, and
/// `permessage-deflate` with its window carried from message to message.
@Suite struct WebSocketMessageAssemblerTests {
    private func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true, rsv1: Bool = false) -> WebSocketFrame {
        WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, data: ByteBuffer(string: text))
    }

    private func fragment(_ step: WebSocketStep) -> WebSocketFragment? {
        if case let .fragment(fragment) = step { return fragment }
        return nil
    }

    @Test func aFragmentedMessageKeepsItsKindAndSaysWhereItBeginsAndEnds() throws {
        var assembler = try WebSocketMessageAssembler(deflate: false)
        let first = fragment(try assembler.take(frame(.text, "one ", fin: false)))
        // A ping may come between a message's fragments.
        guard case .control(.ping, _) = try assembler.take(frame(.ping, "p")) else {
            Issue.record("the ping is a control frame")
            return
        }
        let middle = fragment(try assembler.take(frame(.continuation, "two ", fin: false)))
        let last = fragment(try assembler.take(frame(.continuation, "three")))
        #expect(first?.first == true && first?.last == false && first?.opcode == .text)
        #expect(middle?.first == false && middle?.last == false && middle?.opcode == .text)
        #expect(last?.first == false && last?.last == true && last?.payload == ByteBuffer(string: "three"))
        // The next message begins afresh.
        let next = fragment(try assembler.take(frame(.binary, "b")))
        #expect(next?.first == true && next?.last == true && next?.opcode == .binary)
    }

    @Test func framesOutOfOrderOrWithBitsNoExtensionSetAreRefused() throws {
        var assembler = try WebSocketMessageAssembler(deflate: false)
        #expect(throws: WebSocketViolation.self) { try assembler.take(frame(.continuation, "orphan")) }
        _ = try assembler.take(frame(.text, "open", fin: false))
        #expect(throws: WebSocketViolation.self) { try assembler.take(frame(.text, "another message before the end")) }
        var fresh = try WebSocketMessageAssembler(deflate: false)
        #expect(throws: WebSocketViolation.self) { try fresh.take(frame(.text, "compressed?", rsv1: true)) }
        #expect(throws: WebSocketViolation.self) { try fresh.take(frame(.ping, "fragmented ping", fin: false)) }
        #expect(throws: WebSocketViolation.self) { try fresh.take(frame(.ping, String(repeating: "x", count: 126))) }
        #expect(throws: WebSocketViolation.self) { try fresh.take(frame(.connectionClose, "x")) }
        #expect(throws: WebSocketViolation.self) {
            try fresh.take(WebSocketFrame(fin: true, opcode: WebSocketOpcode(encodedWebSocketOpcode: 0x3)!, data: ByteBuffer()))
        }
    }

    /// Compressed as a sender does (one stream, a sync flush per message,
    /// its last four bytes removed): the second message leans on the first's window.
    @Test func compressedMessagesInflateAcrossTheCarriedWindow() throws {
        let compressor = try ZlibCompressor(algorithm: .deflate, configuration: .init(windowSize: 15))
        func compress(_ text: String) throws -> [UInt8] {
            var input = ByteBuffer(string: text)
            var out = ByteBuffer()
            out.reserveCapacity(text.utf8.count + 64)
            try compressor.deflate(from: &input, to: &out, flush: .sync)
            let bytes = Array(out.readableBytesView)
            #expect(bytes.suffix(4) == [0, 0, 0xFF, 0xFF])
            return Array(bytes.dropLast(4))
        }
        let text = String(repeating: "the same words again and again; ", count: 40)
        let first = try compress(text), second = try compress(text)
        #expect(second.count < first.count / 2, "the second message refers back to the first")
        var assembler = try WebSocketMessageAssembler(deflate: true)
        for wire in [first, second] {
            let step = fragment(try assembler.take(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: ByteBuffer(bytes: wire))))
            #expect(step?.compressed == true && step?.payload == ByteBuffer(string: text) && step?.wire == wire.count)
        }
        // A compressed message may be fragmented: only its first frame sets RSV1.
        let third = try compress("split across two frames")
        let a = fragment(
            try assembler.take(WebSocketFrame(fin: false, rsv1: true, opcode: .text, data: ByteBuffer(bytes: third.prefix(5)))))
        let b = fragment(try assembler.take(WebSocketFrame(fin: true, opcode: .continuation, data: ByteBuffer(bytes: third.dropFirst(5)))))
        var joined = a?.payload ?? ByteBuffer()
        joined.writeImmutableBuffer(b?.payload ?? ByteBuffer())
        #expect(joined == ByteBuffer(string: "split across two frames") && b?.compressed == true)
    }

    /// A sender may end a message with a final block: the next message starts a new stream.
    @Test func aFinalBlockIsFollowedByANewStream() throws {
        func finished(_ text: String) throws -> [UInt8] {
            let compressor = try ZlibCompressor(algorithm: .deflate, configuration: .init(windowSize: 15))
            var input = ByteBuffer(string: text)
            var out = ByteBuffer()
            out.reserveCapacity(256)
            try compressor.deflate(from: &input, to: &out, flush: .finish)
            return Array(out.readableBytesView)
        }
        var assembler = try WebSocketMessageAssembler(deflate: true)
        for text in ["first, then BFINAL", "second, a new stream"] {
            let step = fragment(
                try assembler.take(WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: ByteBuffer(bytes: try finished(text)))))
            #expect(step?.payload == ByteBuffer(string: text))
        }
    }

    @Test func aMessageThatInflatesPastTheLimitIsRefusedAndGarbageToo() throws {
        let compressor = try ZlibCompressor(algorithm: .deflate, configuration: .init(windowSize: 15))
        var zeros = ByteBuffer(repeating: 0, count: 4 << 20)
        var out = ByteBuffer()
        out.reserveCapacity(64 << 10)
        try compressor.deflate(from: &zeros, to: &out, flush: .sync)
        var assembler = try WebSocketMessageAssembler(deflate: true, limit: 1 << 20)
        #expect(throws: WebSocketViolation.tooBig(1 << 20)) {
            try assembler.take(WebSocketFrame(fin: true, rsv1: true, opcode: .binary, data: out))
        }
        var other = try WebSocketMessageAssembler(deflate: true)
        #expect(throws: WebSocketViolation.self) {
            try other.take(WebSocketFrame(fin: true, rsv1: true, opcode: .binary, data: ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0x00, 0x12])))
        }
    }

    @Test func theHandshakeSaysWhetherTheFramesCanBeRead() {
        var request = HTTPHeaders([("Upgrade", "websocket"), ("Connection", "Upgrade")])
        func response(_ extensions: String?) -> HTTPResponseHead {
            var headers = HTTPHeaders([("Upgrade", "WebSocket"), ("Connection", "Upgrade")])
            if let extensions { headers.add(name: "Sec-WebSocket-Extensions", value: extensions) }
            return HTTPResponseHead(version: .http1_1, status: .switchingProtocols, headers: headers)
        }
        #expect(
            WebSocketHandshake.parse(request: request, response: response(nil))
                == .success(WebSocketHandshake(extensions: nil, deflate: false)))
        let deflate = "permessage-deflate; client_max_window_bits=12"
        #expect(
            WebSocketHandshake.parse(request: request, response: response(deflate))
                == .success(WebSocketHandshake(extensions: deflate, deflate: true)))
        #expect(
            WebSocketHandshake.parse(request: request, response: response("x-webkit-deflate-frame"))
                == .failure(.init(extensions: "x-webkit-deflate-frame")))
        // Offered twice is no negotiation the proxy can follow.
        #expect(
            WebSocketHandshake.parse(request: request, response: response("permessage-deflate, permessage-deflate"))
                == .failure(.init(extensions: "permessage-deflate, permessage-deflate")))
        request.replaceOrAdd(name: "Upgrade", value: "h2c")
        #expect(WebSocketHandshake.parse(request: request, response: response(nil)) == nil)
    }
}
