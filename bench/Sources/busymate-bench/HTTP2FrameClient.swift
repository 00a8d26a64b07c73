import NIOCore
import NIOHPACK

/// The generator's HTTP/2 client, at the frame level on one TLS
/// connection: the same GET on a new stream as each one ends, with
/// `streams` of them open at once (fewer if the server's SETTINGS say so).
/// It keeps no channel per stream, as h2load keeps none, so the generator
/// costs a fraction of what the system under test does and the cell
/// measures the proxy, not NIO's per-stream machinery on the client side.
/// Confined to the connection's event loop.
final class HTTP2FrameClient: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// What the handler reports to its worker.
    struct Events: Sendable {
        var ended: @Sendable (_ status: UInt, _ since: NIODeadline) -> Void
        var lost: @Sendable (_ reason: String) -> Void
        var body: @Sendable (_ bytes: Int) -> Void
        /// Whether another request may start (the cell's deadline).
        var mayStart: @Sendable () -> Bool
        /// The last stream has ended after the deadline: the worker is done
        /// (and closes the connection).
        var drained: @Sendable () -> Void
    }

    private struct Stream {
        var started: NIODeadline
        var status: UInt = 0
    }

    private static let preface = ByteBuffer(string: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    /// Each stream carries one response: with the largest window it never needs a WINDOW_UPDATE.
    private static let streamWindow = UInt32(Int32.max)
    private static let lastStreamID: UInt32 = 0x7fff_ffff
    /// The connection's window is topped up by what was read once this much has been.
    private static let replenishAt = 1 << 20

    private let events: Events
    private let streams: Int
    /// The request's header block: literals without indexing (RFC 7541 §6.2.2), so the same bytes serve every stream.
    private let requestBlock: ByteBuffer
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    private var inbound: ByteBuffer?
    private var outbound = ByteBuffer()
    private var open: [UInt32: Stream] = [:]
    private var nextStreamID: UInt32 = 1
    /// Streams may open once the server's first SETTINGS has come (its stream limit known).
    private var limit: Int?
    /// The server sent GOAWAY: no stream opens on this connection again (RFC 9113 §6.8).
    private var goingAway = false
    private var unacknowledged = 0
    /// A header block spread over CONTINUATION frames.
    private var continuing: (id: UInt32, block: ByteBuffer, endStream: Bool)?
    private var over = false

    init(authority: String, path: String, streams: Int, events: Events) throws {
        self.events = events
        self.streams = streams
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        try encoder.beginEncoding(allocator: ByteBufferAllocator())
        for (name, value) in [
            (":method", "GET"), (":scheme", "https"), (":authority", authority), (":path", path), ("user-agent", "busymate-bench"),
        ] {
            try encoder.appendNonIndexed(header: name, value: value)
        }
        requestBlock = try encoder.endEncoding()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        var start = Self.preface
        // SETTINGS: no push, a stream window for the responses.
        Self.writeFrameHeader(&start, length: 12, type: 0x4, flags: 0, stream: 0)
        start.writeInteger(UInt16(0x2))
        start.writeInteger(UInt32(0))
        start.writeInteger(UInt16(0x4))
        start.writeInteger(Self.streamWindow)
        // The connection's window, as large as the protocol allows.
        Self.writeFrameHeader(&start, length: 4, type: 0x8, flags: 0, stream: 0)
        start.writeInteger(UInt32(Int32.max) - 65_535)
        context.writeAndFlush(wrapOutboundOut(start), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        if inbound == nil || inbound?.readableBytes == 0 {
            inbound = bytes
        } else {
            inbound?.writeBuffer(&bytes)
        }
        guard var buffer = inbound else { return }
        inbound = nil
        while !over, let (length, type, flags, id) = Self.frameHeader(buffer), buffer.readableBytes >= 9 + length {
            buffer.moveReaderIndex(forwardBy: 9)
            guard var payload = buffer.readSlice(length: length) else { break }
            frame(type: type, flags: flags, stream: id, payload: &payload, context: context)
        }
        // A partial frame is kept in a buffer of our own: a slice would pin NIOSSL's read buffer.
        if buffer.readableBytes > 0 {
            var own = context.channel.allocator.buffer(capacity: max(buffer.readableBytes, 16 * 1024))
            own.writeBuffer(&buffer)
            inbound = own
        }
    }

    /// Whether the server's first SETTINGS came: a connection that ends before it never spoke HTTP/2.
    var began: Bool { limit != nil }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush(context)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll("the connection closed mid-response")
        context.fireChannelInactive()
    }

    // MARK: frames in

    private func frame(type: UInt8, flags: UInt8, stream id: UInt32, payload: inout ByteBuffer, context: ChannelHandlerContext) {
        if let continuing, type != 0x9 || id != continuing.id {
            return protocolError("a header block was interrupted", context)
        }
        switch type {
        case 0x0:  // DATA
            unacknowledged += payload.readableBytes
            if unacknowledged >= Self.replenishAt {
                Self.writeFrameHeader(&outbound, length: 4, type: 0x8, flags: 0, stream: 0)
                outbound.writeInteger(UInt32(unacknowledged))
                unacknowledged = 0
            }
            guard let body = Self.unpadded(payload, flags: flags) else { return protocolError("bad padding", context) }
            events.body(body.readableBytes)
            if flags & 0x1 != 0 { end(id, context) }
        case 0x1:  // HEADERS
            guard var block = Self.unpadded(payload, flags: flags) else { return protocolError("bad padding", context) }
            if flags & 0x20 != 0 { block.moveReaderIndex(forwardBy: min(5, block.readableBytes)) }
            if flags & 0x4 != 0 {
                headers(id, block: &block, endStream: flags & 0x1 != 0, context)
            } else {
                continuing = (id, block, flags & 0x1 != 0)
            }
        case 0x9:  // CONTINUATION
            guard let (cid, started, endStream) = continuing else { return protocolError("CONTINUATION without HEADERS", context) }
            var block = started
            block.writeBuffer(&payload)
            if flags & 0x4 != 0 {
                continuing = nil
                headers(cid, block: &block, endStream: endStream, context)
            } else {
                continuing = (cid, block, endStream)
            }
        case 0x3:  // RST_STREAM
            let code = payload.readInteger(as: UInt32.self) ?? 0
            if open.removeValue(forKey: id) != nil {
                events.lost("stream reset (error code \(code))")
                startStreams(context)
            }
        case 0x4:  // SETTINGS
            guard flags & 0x1 == 0 else { return }
            var maxStreams = limit ?? Int.max
            while let parameter = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                if parameter == 0x3 { maxStreams = Int(value) }
            }
            limit = maxStreams
            Self.writeFrameHeader(&outbound, length: 0, type: 0x4, flags: 0x1, stream: 0)
            startStreams(context)
        case 0x6:  // PING
            guard flags & 0x1 == 0 else { return }
            Self.writeFrameHeader(&outbound, length: payload.readableBytes, type: 0x6, flags: 0x1, stream: 0)
            outbound.writeBuffer(&payload)
        case 0x7:  // GOAWAY
            let last = (payload.readInteger(as: UInt32.self) ?? 0) & 0x7fff_ffff
            let code = payload.readInteger(as: UInt32.self) ?? 0
            goingAway = true
            for id in open.keys where id > last {
                open[id] = nil
                events.lost("GOAWAY (error code \(code))")
            }
            startStreams(context)
        default:  // PRIORITY, WINDOW_UPDATE (nothing is sent that waits on one), unknown
            break
        }
    }

    private func headers(_ id: UInt32, block: inout ByteBuffer, endStream: Bool, _ context: ChannelHandlerContext) {
        // Decoded even when nobody reads them: the server's dynamic table depends on it.
        guard let decoded = try? decoder.decodeHeaders(from: &block) else { return protocolError("HPACK", context) }
        if var stream = open[id], stream.status < 200, let value = decoded.first(name: ":status"), let status = UInt(value) {
            stream.status = status
            open[id] = stream
        }
        if endStream { end(id, context) }
    }

    // MARK: streams

    private func end(_ id: UInt32, _ context: ChannelHandlerContext) {
        guard let stream = open.removeValue(forKey: id) else { return }
        events.ended(stream.status, stream.started)
        startStreams(context)
    }

    /// Opens streams up to the limit; with none open and none to open, the
    /// connection is over: after the deadline the worker is done, before it
    /// (a GOAWAY, stream ids spent) it closes and the worker dials anew.
    private func startStreams(_ context: ChannelHandlerContext) {
        guard let limit else { return }
        let connectionTakesMore = !goingAway && nextStreamID <= Self.lastStreamID
        while connectionTakesMore, open.count < min(streams, limit), nextStreamID <= Self.lastStreamID, events.mayStart() {
            let id = nextStreamID
            nextStreamID &+= 2
            open[id] = Stream(started: .now())
            // HEADERS with END_STREAM | END_HEADERS: a GET has no body.
            Self.writeFrameHeader(&outbound, length: requestBlock.readableBytes, type: 0x1, flags: 0x5, stream: id)
            outbound.writeImmutableBuffer(requestBlock)
        }
        guard open.isEmpty else { return }
        if !events.mayStart() {
            flush(context)
            events.drained()
        } else if !connectionTakesMore {
            flush(context)
            context.close(promise: nil)
        }
    }

    private func flush(_ context: ChannelHandlerContext) {
        guard outbound.readableBytes > 0, context.channel.isActive else { return }
        let bytes = outbound
        outbound = context.channel.allocator.buffer(capacity: 1024)
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    private func protocolError(_ what: String, _ context: ChannelHandlerContext) {
        failAll("HTTP/2 protocol error: \(what)")
        context.close(promise: nil)
    }

    private func failAll(_ reason: String) {
        over = true
        let lost = open.count
        open.removeAll()
        for _ in 0..<lost { events.lost(reason) }
    }

    // MARK: framing

    private static func frameHeader(_ buffer: ByteBuffer) -> (length: Int, type: UInt8, flags: UInt8, stream: UInt32)? {
        guard buffer.readableBytes >= 9,
            let high = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self),
            let low = buffer.getInteger(at: buffer.readerIndex + 1, as: UInt16.self),
            let type = buffer.getInteger(at: buffer.readerIndex + 3, as: UInt8.self),
            let flags = buffer.getInteger(at: buffer.readerIndex + 4, as: UInt8.self),
            let stream = buffer.getInteger(at: buffer.readerIndex + 5, as: UInt32.self)
        else { return nil }
        return (Int(high) << 16 | Int(low), type, flags, stream & 0x7fff_ffff)
    }

    private static func writeFrameHeader(_ buffer: inout ByteBuffer, length: Int, type: UInt8, flags: UInt8, stream: UInt32) {
        buffer.writeInteger(UInt8(truncatingIfNeeded: length >> 16))
        buffer.writeInteger(UInt16(truncatingIfNeeded: length))
        buffer.writeInteger(type)
        buffer.writeInteger(flags)
        buffer.writeInteger(stream)
    }

    /// A DATA or HEADERS payload without its padding (PADDED: a length byte first).
    private static func unpadded(_ payload: ByteBuffer, flags: UInt8) -> ByteBuffer? {
        guard flags & 0x8 != 0 else { return payload }
        var payload = payload
        guard let pad = payload.readInteger(as: UInt8.self), Int(pad) <= payload.readableBytes else { return nil }
        return payload.readSlice(length: payload.readableBytes - Int(pad))
    }
}
