import NIOCore
import NIOEmbedded
import NIOHPACK
import Testing

@testable import ProxyEngine

/// Hostile HTTP/2 clients at the client-facing layer: an h2c client of the
/// explicit proxy (FrontEndSniffer sees the preface and installs the
/// HTTP/2 layer with HTTP2Limits), frames written by hand, the network a
/// stand-in connector that counts dials. Each test reads back what the
/// client would: the proxy's frames.
@Suite struct HTTP2HostileClientTests {
    typealias Harness = ProxyPipelineTests.Harness

    /// The client's bytes in, then what the loop was asked to do next; the
    /// loop goes round also when the bytes end in an error (a connection's
    /// flush waits for the end of the tick, GOAWAY included).
    static func send(_ h: Harness, _ bytes: [UInt8]) throws {
        defer { h.client.embeddedEventLoop.run() }
        try h.client.writeInbound(ByteBuffer(bytes: bytes))
    }

    /// Everything the proxy wrote to the client so far, as frames.
    static func received(_ h: Harness) throws -> [H2Wire.Frame] {
        var bytes: [UInt8] = []
        while let buffer = try h.client.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        let (frames, rest) = H2Wire.frames(bytes)
        #expect(rest == 0, "the proxy wrote \(rest) bytes that are not a whole frame")
        return frames
    }

    static func goaway(_ frames: [H2Wire.Frame]) -> UInt32? { frames.last { $0.is(.goaway) }?.errorCode }

    @Test func anH2CRequestGoesUpstreamAndItsAnswerComesBackOnItsStream() throws {
        let h = try Harness()
        try Self.send(
            h, H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.request("/x")))
        #expect(h.connector.dials == ["example.com:80"])
        #expect(try h.upstreamReceived().hasPrefix("GET /x HTTP/1.1\r\n"))
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        h.client.embeddedEventLoop.run()
        let frames = try Self.received(h)
        #expect(frames.first?.is(.settings) == true && frames.first?.flags == 0, "the proxy's first frame is its SETTINGS")
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(frames, decoder: &decoder) == [1: "200"])
        #expect(frames.contains { $0.is(.data) && $0.stream == 1 && $0.payload == Array("hi".utf8) })
    }

    /// h2c to the explicit proxy with `:scheme https`: refused as an
    /// absolute-form https:// URL is (it must come through CONNECT), never
    /// fetched in plain text from the named port.
    @Test func anH2CRequestForHTTPSIsRefusedNotFetchedInPlainText() throws {
        let h = try Harness()
        let request =
            H2Wire.literal(":method", "GET") + H2Wire.literal(":scheme", "https") + H2Wire.literal(":authority", "example.com:443")
            + H2Wire.literal(":path", "/secret")
        try Self.send(h, H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, request))
        h.client.embeddedEventLoop.run()
        #expect(h.connector.dials.isEmpty, "dialled \(h.connector.dials)")
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(Self.received(h), decoder: &decoder) == [1: "400"])
    }

    @Test func aPingIsAnsweredWithItsOwnData() throws {
        let h = try Harness()
        let opaque = Array("busymate".utf8)
        try Self.send(h, H2Wire.opening + H2Wire.frame(.ping, opaque))
        let frames = try Self.received(h)
        #expect(
            frames.contains { $0.is(.ping) && $0.flags == H2Wire.ack && $0.stream == 0 && $0.payload == opaque }, "\(frames.map(\.kind))")
        #expect(h.client.isActive)
    }

    /// One stream's error (a header name in upper case: RST_STREAM) while
    /// the client is not reading, as in a back-pressured download: only that
    /// stream ends; the connection, and what its other streams carry, stays.
    @Test func aStreamErrorWhileTheClientIsNotReadingLeavesTheConnectionOpen() throws {
        let h = try Harness()
        try Self.send(h, H2Wire.opening)
        _ = try Self.received(h)
        h.client.isWritable = false
        h.client.pipeline.fireChannelWritabilityChanged()
        let bad = H2Wire.request("/x") + H2Wire.literal("X-Upper", "v")
        try? Self.send(h, H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, bad))
        #expect(h.client.isActive, "a stream error closed the whole connection")
        h.client.isWritable = true
        h.client.pipeline.fireChannelWritabilityChanged()
        h.client.embeddedEventLoop.run()
        let frames = try Self.received(h)
        #expect(frames.contains { $0.is(.rstStream) && $0.stream == 1 }, "\(frames.map(\.kind))")
        #expect(Self.goaway(frames) == nil)
        #expect(h.connector.dials.isEmpty)
    }

    /// CVE-2023-44487: a stream opened and cancelled, over and over. The
    /// connection ends with ENHANCE_YOUR_CALM once HTTP2Limits.maxResets is
    /// passed; the dials it caused stay within that bound, none follow the
    /// GOAWAY, and none is left open.
    @Test func rapidResetEndsTheConnectionWithEnhanceYourCalmAndNoDialStorm() throws {
        let h = try Harness()
        try Self.send(h, H2Wire.opening)
        var attack: [UInt8] = []
        for stream in stride(from: UInt32(1), through: UInt32(2 * (HTTP2Limits.maxResets + 100)), by: 2) {
            attack += H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: stream, H2Wire.request("/r\(stream)"))
            attack += H2Wire.frame(.rstStream, stream: stream, H2Wire.be32(H2Wire.cancel))
        }
        try? Self.send(h, attack)
        let frames = try Self.received(h)
        #expect(Self.goaway(frames) == H2Wire.enhanceYourCalm, "GOAWAY \(String(describing: Self.goaway(frames)))")
        #expect(!h.client.isActive)
        let dials = h.connector.dials.count
        #expect(dials <= HTTP2Limits.maxResets + 1, "\(dials) dials for a Rapid Reset")
        #expect(
            h.connector.upstreams.allSatisfy { !$0.isActive },
            "\(h.connector.upstreams.filter(\.isActive).count) upstream connections left open")
    }

    /// CVE-2024-27316 class: a header block that never ends.
    @Test func aContinuationFloodIsAConnectionErrorAndDialsNothing() throws {
        let h = try Harness()
        let block = H2Wire.request("/flood") + H2Wire.literal("x-pad", String(repeating: "p", count: 64))
        var attack = H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endStream, stream: 1, Array(block.prefix(4)))
        var rest = block.dropFirst(4)
        while !rest.isEmpty {
            attack += H2Wire.frame(.continuation, stream: 1, Array(rest.prefix(4)))
            rest = rest.dropFirst(4)
        }
        #expect(attack.count > 4 * (HTTP2Limits.maxContinuationFrames + 1), "the flood is longer than the limit")
        try? Self.send(h, attack)
        let frames = try Self.received(h)
        #expect(Self.goaway(frames) == H2Wire.enhanceYourCalm, "GOAWAY \(String(describing: Self.goaway(frames)))")
        #expect(!h.client.isActive)
        #expect(h.connector.dials.isEmpty)
    }

    /// An HPACK bomb: one large field put in the dynamic table, then named
    /// by its one-byte index again and again, so a 4 KB block decodes to a
    /// header list far over HTTP2Limits.maxHeaderListSize. NIO's decoder
    /// stops at the limit, which makes it a connection error
    /// (COMPRESSION_ERROR: the HPACK context can no longer be trusted); it is
    /// never buffered, nothing is dialled, and the connection closes.
    @Test func anHPACKBombIsAConnectionErrorNotBuffered() throws {
        let h = try Harness()
        let big = String(repeating: "b", count: 4000)
        let copies = HTTP2Limits.maxHeaderListSize / 4000 + 4
        let block =
            H2Wire.request("/bomb") + H2Wire.literal("x-bomb", big, indexed: true)
            + Array(repeating: H2Wire.indexed(62), count: copies).flatMap { $0 }
        #expect(block.count < 16_384 && (copies + 1) * 4000 > HTTP2Limits.maxHeaderListSize)
        try? Self.send(h, H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, block))
        let frames = try Self.received(h)
        #expect(!frames.contains { $0.is(.headers) }, "the bomb was answered: \(frames.map(\.kind))")
        #expect(Self.goaway(frames) == H2Wire.compressionError, "GOAWAY \(String(describing: Self.goaway(frames)))")
        #expect(!h.client.isActive)
        #expect(h.connector.dials.isEmpty, "the bomb was dialled: \(h.connector.dials)")
    }

    /// The limit is the one HTTP2Limits announces, not a smaller default: a
    /// header list of 40 KB, in HEADERS and CONTINUATION frames, goes through.
    @Test func aLargeHeaderListUnderTheLimitGoesThrough() throws {
        let h = try Harness()
        let value = String(repeating: "v", count: 40_000)
        let block = H2Wire.request("/large") + H2Wire.literal("x-large", value)
        var bytes = H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endStream, stream: 1, Array(block.prefix(16_000)))
        bytes += H2Wire.frame(.continuation, stream: 1, Array(block.dropFirst(16_000).prefix(16_000)))
        bytes += H2Wire.frame(.continuation, flags: H2Wire.endHeaders, stream: 1, Array(block.dropFirst(32_000)))
        try Self.send(h, bytes)
        #expect(h.connector.dials == ["example.com:80"])
        let upstream = try h.upstreamReceived()
        #expect(upstream.hasPrefix("GET /large HTTP/1.1\r\n") && upstream.contains("x-large: \(value)\r\n"))
        #expect(h.client.isActive)
    }

    /// Past the limit without tricks: 70 KB of one header, in HEADERS and
    /// CONTINUATION frames (fewer than the flood limit). NIO's frame decoder
    /// refuses the block itself before decoding it: PROTOCOL_ERROR.
    @Test func aHeaderListOverTheLimitIsAConnectionError() throws {
        let h = try Harness()
        let block = H2Wire.request("/over") + H2Wire.literal("x-large", String(repeating: "v", count: 70_000))
        var bytes = H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endStream, stream: 1, Array(block.prefix(16_000)))
        var rest = block.dropFirst(16_000)
        while !rest.isEmpty {
            let chunk = Array(rest.prefix(16_000))
            rest = rest.dropFirst(16_000)
            bytes += H2Wire.frame(.continuation, flags: rest.isEmpty ? H2Wire.endHeaders : 0, stream: 1, chunk)
        }
        try? Self.send(h, bytes)
        let frames = try Self.received(h)
        #expect(!frames.contains { $0.is(.headers) })
        #expect(Self.goaway(frames) == H2Wire.protocolError, "GOAWAY \(String(describing: Self.goaway(frames)))")
        #expect(!h.client.isActive)
        #expect(h.connector.dials.isEmpty)
    }

    /// A SETTINGS flood (each owes the client an ACK): past NIO's control-frame
    /// rate limit (200 in 30 s) the connection ends with ENHANCE_YOUR_CALM.
    @Test func aSettingsFloodEndsTheConnectionWithEnhanceYourCalm() throws {
        let h = try Harness()
        try Self.send(h, H2Wire.opening)
        _ = try Self.received(h)
        try? Self.send(h, Array(repeating: H2Wire.frame(.settings), count: 300).flatMap { $0 })
        let frames = try Self.received(h)
        let acks = frames.filter { $0.is(.settings) && $0.flags == H2Wire.ack }.count
        #expect(acks <= 200, "\(acks) SETTINGS acknowledged")
        #expect(Self.goaway(frames) == H2Wire.enhanceYourCalm, "GOAWAY \(String(describing: Self.goaway(frames)))")
        #expect(!h.client.isActive)
    }

    /// The same flood from a client that never reads: the ACKs wait in a
    /// bounded buffer, the GOAWAY cannot be written, and the connection closes.
    @Test func aSettingsFloodFromAClientThatDoesNotReadClosesTheConnection() throws {
        let h = try Harness()
        try Self.send(h, H2Wire.opening)
        _ = try Self.received(h)
        h.client.isWritable = false
        h.client.pipeline.fireChannelWritabilityChanged()
        try? Self.send(h, Array(repeating: H2Wire.frame(.settings), count: 300).flatMap { $0 })
        #expect(!h.client.isActive, "the connection stays open with the ACKs of a SETTINGS flood buffered")
        #expect(h.connector.dials.isEmpty)
    }

    /// A few SETTINGS and PINGs, well under the limit, are only answered.
    @Test func settingsAndPingsUnderTheLimitAreAllAnswered() throws {
        let h = try Harness()
        try Self.send(h, H2Wire.opening)
        _ = try Self.received(h)
        try Self.send(
            h, Array(repeating: H2Wire.frame(.settings) + H2Wire.frame(.ping, Array(repeating: 7, count: 8)), count: 50).flatMap { $0 })
        let frames = try Self.received(h)
        #expect(frames.filter { $0.is(.settings) && $0.flags == H2Wire.ack }.count == 50)
        #expect(frames.filter { $0.is(.ping) && $0.flags == H2Wire.ack }.count == 50)
        #expect(Self.goaway(frames) == nil && h.client.isActive)
    }
}
