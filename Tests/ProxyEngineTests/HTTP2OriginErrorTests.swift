import NIOCore
import NIOHPACK
import Testing

@testable import ProxyEngine

/// An origin HTTP/2 connection that breaks the protocol: NIO's client
/// answers with a GOAWAY, and the connection must then close so that the
/// streams on it fail at once instead of waiting for a response timeout.
@Suite struct HTTP2OriginErrorTests {
    typealias Harness = ProxyPipelineTests.Harness

    /// A gRPC call over h2c goes to the origin as h2c with prior knowledge;
    /// an origin that answers HTTP/1.1 instead gets GOAWAY PROTOCOL_ERROR,
    /// its connection closes, and the client's stream is answered 502 then,
    /// not 504 after timeouts.upstream_response_seconds.
    @Test func anOriginThatAnswersH2CWithHTTP1FailsTheCallAtOnce() throws {
        let h = try Harness()
        let head =
            H2Wire.request("/grpc.Echo/Say", method: "POST", authority: "api.test")
            + H2Wire.literal("content-type", "application/grpc") + H2Wire.literal("te", "trailers")
        try HTTP2HostileClientTests.send(
            h,
            H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders, stream: 1, head)
                + H2Wire.frame(.data, stream: 1, [0, 0, 0, 0, 3, 0x0a, 1, 0x78])
                + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.literal("x-trailer", "t")))
        #expect(h.connector.dials == ["api.test:80"])
        #expect(try h.upstreamReceived().hasPrefix("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "the call goes to the origin as h2c")
        try? h.upstreamSends("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
        h.client.embeddedEventLoop.run()
        #expect(h.connector.upstreams.first?.isActive == false, "the origin connection stays open after its GOAWAY")
        let frames = try HTTP2HostileClientTests.received(h)
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(frames, decoder: &decoder) == [1: "502"], "the client saw \(frames.map { "\($0.kind)/\($0.stream)" })")
        #expect(h.client.isActive, "the client's connection goes on")
    }

    /// A server shutting down sends its SETTINGS and a GOAWAY with
    /// last-stream-id 0 in one segment: the call's stream, which that origin
    /// never processed, goes once more on a new connection (RFC 9113 §8.7)
    /// and is answered from there, not failed as a 502.
    @Test func aGoawayInTheSameReadAsTheFirstSettingsSendsTheStreamAgain() throws {
        let h = try Harness()
        let head =
            H2Wire.request("/grpc.Echo/Say", method: "POST", authority: "api.test")
            + H2Wire.literal("content-type", "application/grpc") + H2Wire.literal("te", "trailers")
        try HTTP2HostileClientTests.send(
            h,
            H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders, stream: 1, head)
                + H2Wire.frame(.data, flags: H2Wire.endStream, stream: 1, [0, 0, 0, 0, 3, 0x0a, 1, 0x78]))
        #expect(h.connector.dials == ["api.test:80"])
        #expect(try h.upstreamReceived().hasPrefix("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "the call goes to the origin as h2c")
        // SETTINGS and GOAWAY(last-stream-id 0, NO_ERROR) in one read.
        try h.connector.upstreams[0].writeInbound(
            ByteBuffer(bytes: H2Wire.frame(.settings) + H2Wire.frame(.goaway, H2Wire.be32(0) + H2Wire.be32(0))))
        h.client.embeddedEventLoop.run()
        #expect(h.connector.dials == ["api.test:80", "api.test:80"], "the stream the origin did not process is dialled anew")
        guard h.connector.upstreams.count == 2 else { return }
        try h.connector.upstreams[1].writeInbound(ByteBuffer(bytes: H2Wire.frame(.settings)))
        h.client.embeddedEventLoop.run()
        var bytes: [UInt8] = []
        while let buffer = try h.connector.upstreams[1].readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        #expect(bytes.starts(with: H2Wire.preface), "the second connection is h2c too")
        let sent = H2Wire.frames(Array(bytes.dropFirst(H2Wire.preface.count)))
        #expect(sent.frames.contains { $0.is(.headers) && $0.stream == 1 }, "the call's stream is sent on the new connection")
        try h.connector.upstreams[1].writeInbound(
            ByteBuffer(
                bytes: H2Wire.frame(
                    .headers, flags: H2Wire.endHeaders, stream: 1,
                    H2Wire.literal(":status", "200") + H2Wire.literal("content-type", "application/grpc"))
                    + H2Wire.frame(.data, stream: 1, [0, 0, 0, 0, 3, 0x0a, 1, 0x79])
                    + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.literal("grpc-status", "0"))))
        h.client.embeddedEventLoop.run()
        let frames = try HTTP2HostileClientTests.received(h)
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(frames, decoder: &decoder) == [1: "200"], "the client saw \(frames.map { "\($0.kind)/\($0.stream)" })")
    }

    /// Streams whose origin never answers are each answered 504 at
    /// timeouts.upstream_response_seconds from their own request's end (the
    /// streams share one timer), and a stream that ended meanwhile is not.
    @Test func silentOriginsTimeEachStreamOutAtItsOwnDeadline() throws {
        let h = try Harness()
        let loop = h.client.embeddedEventLoop
        try HTTP2HostileClientTests.send(
            h,
            H2Wire.opening + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.request("/a")))
        loop.advanceTime(by: .seconds(60))
        try HTTP2HostileClientTests.send(
            h,
            H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 3, H2Wire.request("/b"))
                + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 5, H2Wire.request("/c")))
        #expect(h.connector.dials.count == 3, "\(h.connector.dials)")
        guard h.connector.upstreams.count == 3 else { return }
        // Stream 5's origin answers; streams 1 and 3 hear nothing.
        try h.upstreamSends("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", 2)
        loop.run()
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder) == [5: "200"])
        loop.advanceTime(by: .seconds(59))
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder).isEmpty)
        loop.advanceTime(by: .seconds(1))
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder) == [1: "504"])
        loop.advanceTime(by: .seconds(59))
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder).isEmpty)
        loop.advanceTime(by: .seconds(1))
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder) == [3: "504"])
        loop.advanceTime(by: .seconds(300))
        #expect(try H2Wire.statuses(try HTTP2HostileClientTests.received(h), decoder: &decoder).isEmpty)
        #expect(h.client.isActive)
    }
}
