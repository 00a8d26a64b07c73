import NIOCore
import NIOEmbedded
import NIOHPACK
import Testing

@testable import ProxyEngine

/// Streams answered in one event loop tick share one flush of their HTTP/2
/// connection (one TLS flush, one `write`), each direction: the responses
/// the origins sent meanwhile, to the client; the requests a client sent
/// in one read, to an HTTP/2 origin; their small frames as one write (one
/// TLS record). Each test counts the writes and flushes that reach the
/// connection's socket.
@Suite struct HTTP2FlushTests {
    typealias Harness = ProxyPipelineTests.Harness

    /// Next to the socket: counts the writes and flushes that reach it.
    final class FlushCounter: ChannelOutboundHandler {
        typealias OutboundIn = NIOAny
        var flushes = 0
        var writes = 0

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            writes += 1
            context.write(data, promise: promise)
        }

        func flush(context: ChannelHandlerContext) {
            flushes += 1
            context.flush()
        }
    }

    @Test func answersFromTwoOriginsInOneTickReachTheClientInOneFlush() throws {
        let h = try Harness()
        try HTTP2HostileClientTests.send(
            h,
            H2Wire.opening
                + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 1, H2Wire.request("/a"))
                + H2Wire.frame(.headers, flags: H2Wire.endHeaders | H2Wire.endStream, stream: 3, H2Wire.request("/b")))
        #expect(h.connector.upstreams.count == 2, "dials: \(h.connector.dials)")
        _ = try HTTP2HostileClientTests.received(h)
        let counter = FlushCounter()
        try h.client.pipeline.syncOperations.addHandler(counter, position: .first)
        // Both origins answer before the loop comes round again.
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", 0)
        try h.upstreamSends("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb", 1)
        h.client.embeddedEventLoop.run()
        #expect(counter.flushes == 1, "\(counter.flushes) flushes for two answers in one tick")
        #expect(counter.writes == 1, "\(counter.writes) writes for two small answers in one tick")
        let frames = try HTTP2HostileClientTests.received(h)
        var decoder = HPACKDecoder(allocator: .init())
        #expect(try H2Wire.statuses(frames, decoder: &decoder) == [1: "200", 3: "200"])
        #expect(frames.contains { $0.is(.data) && $0.stream == 1 && $0.payload == Array("a".utf8) })
        #expect(frames.contains { $0.is(.data) && $0.stream == 3 && $0.payload == Array("b".utf8) })
    }

    /// gRPC over h2c goes to the origin over h2c: two calls the client sent
    /// in one read reach that origin connection in one flush.
    @Test func requestsReadTogetherReachAnHTTP2OriginInOneFlush() throws {
        let h = try Harness()
        func call(_ stream: UInt32) -> [UInt8] {
            let head =
                H2Wire.request("/grpc.Echo/Say", method: "POST", authority: "api.test")
                + H2Wire.literal("content-type", "application/grpc") + H2Wire.literal("te", "trailers")
            return H2Wire.frame(.headers, flags: H2Wire.endHeaders, stream: stream, head)
                + H2Wire.frame(.data, flags: H2Wire.endStream, stream: stream, [0, 0, 0, 0, 3, 0x0a, 1, 0x78])
        }
        try HTTP2HostileClientTests.send(h, H2Wire.opening + call(1))
        #expect(h.connector.dials == ["api.test:80"])
        let origin = try #require(h.connector.upstreams.first)
        // The origin's SETTINGS and its ack of ours: the connection is settled and the first call goes.
        try origin.writeInbound(ByteBuffer(bytes: H2Wire.frame(.settings) + H2Wire.frame(.settings, flags: H2Wire.ack)))
        h.client.embeddedEventLoop.run()
        _ = try h.upstreamReceived()
        let counter = FlushCounter()
        try origin.pipeline.syncOperations.addHandler(counter, position: .first)
        try HTTP2HostileClientTests.send(h, call(3) + call(5))
        #expect(h.connector.dials.count == 1, "dials: \(h.connector.dials)")
        #expect(counter.flushes == 1, "\(counter.flushes) flushes for two calls read together")
        #expect(counter.writes == 1, "\(counter.writes) writes for two small calls read together")
        var bytes: [UInt8] = []
        while let buffer = try origin.readOutbound(as: ByteBuffer.self) { bytes += buffer.readableBytesView }
        let frames = H2Wire.frames(bytes).frames
        #expect(Set(frames.filter { $0.is(.headers) }.map(\.stream)) == [3, 5], "\(frames.map { "\($0.kind)/\($0.stream)" })")
    }

    /// Frames written and not yet flushed when the connection is closed go out first, not lost.
    @Test func framesWrittenBeforeACloseAreSentFirst() throws {
        let channel = EmbeddedChannel(handler: FlushCoalescer())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        let written = channel.write(ByteBuffer(string: "goaway"))
        channel.close(promise: nil)
        channel.embeddedEventLoop.run()
        #expect(try channel.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "goaway"))
        // Not `wait()`: on an embedded loop a write that never completes would block the test.
        var outcome: Bool?
        written.assumeIsolated().whenComplete { result in outcome = (try? result.get()) != nil }
        #expect(outcome == true, "the write failed, or never completed")
    }
}
