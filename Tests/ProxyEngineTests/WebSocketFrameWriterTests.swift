import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import ProxyEngine

/// The relay's frame writer against NIO's encoder, the reference: the same
/// bytes on the wire for every length encoding, flag and mask, in one buffer.
struct WebSocketFrameWriterTests {
    /// What NIO's encoder puts on the wire for `frame`, its buffers joined.
    private func reference(_ frame: WebSocketFrame) throws -> [UInt8] {
        let channel = EmbeddedChannel(handler: WebSocketFrameEncoder())
        try channel.writeAndFlush(frame).wait()
        var bytes: [UInt8] = []
        while var part = try channel.readOutbound(as: ByteBuffer.self) { bytes += part.readBytes(length: part.readableBytes) ?? [] }
        _ = try channel.finish()
        return bytes
    }

    /// What the writer puts on the wire, and in how many buffers.
    private func written(_ frame: WebSocketFrame) throws -> (bytes: [UInt8], buffers: Int) {
        let channel = EmbeddedChannel(handler: WebSocketFrameWriter())
        try channel.writeAndFlush(frame).wait()
        var bytes: [UInt8] = []
        var buffers = 0
        while var part = try channel.readOutbound(as: ByteBuffer.self) {
            buffers += 1
            bytes += part.readBytes(length: part.readableBytes) ?? []
        }
        _ = try channel.finish()
        return (bytes, buffers)
    }

    private func payload(_ count: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        for index in 0..<count { buffer.writeInteger(UInt8(truncatingIfNeeded: index &* 31 &+ 7)) }
        return buffer
    }

    @Test(arguments: [0, 1, 3, 7, 8, 9, 15, 17, 125, 126, 127, 1024, 1031, 16384, 16385, 65535, 65536, 70001])
    func sameBytesAsNIOsEncoderInOneBuffer(length: Int) throws {
        let key = try #require(WebSocketMaskingKey([0x12, 0xA5, 0x00, 0xFF]))
        let frames = [
            WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: payload(length)),
            WebSocketFrame(fin: true, opcode: .binary, data: payload(length)),
            WebSocketFrame(fin: false, rsv1: true, opcode: .continuation, maskKey: key, data: payload(length)),
            WebSocketFrame(fin: true, rsv2: true, opcode: .binary, data: payload(length)),
            WebSocketFrame(fin: true, rsv3: true, opcode: .ping, maskKey: key, data: payload(min(length, 125))),
        ]
        for frame in frames {
            let ours = try written(frame)
            #expect(ours.bytes == (try reference(frame)), "length \(length), opcode \(frame.opcode), masked \(frame.maskKey != nil)")
            // One TLS record's worth goes as one buffer; past that, header and payload.
            #expect(ours.buffers == (frame.data.readableBytes <= WebSocketFrameWriter.coalescedPayload ? 1 : 2))
        }
    }

    @Test(arguments: [21, 20000])
    func extensionDataGoesFirstAndIsMaskedWithThePayload(length: Int) throws {
        let key = try #require(WebSocketMaskingKey([9, 8, 7, 6]))
        for maskKey in [key, nil] {
            let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: maskKey, data: payload(length), extensionData: payload(5))
            #expect(try written(frame).bytes == (try reference(frame)))
        }
    }

    @Test(arguments: [0, 1, 4, 5, 8, 13, 64, 1000])
    func unmaskingIsNIOsAtEveryLength(length: Int) throws {
        let key = try #require(WebSocketMaskingKey([0xDE, 0xAD, 0xBE, 0xEF]))
        var ours = payload(length)
        var theirs = payload(length)
        WebSocketMasking.apply(key, to: &ours)
        theirs.webSocketUnmask(key)
        #expect(ours == theirs)
        WebSocketMasking.apply(key, to: &ours)
        #expect(ours == payload(length))
    }

    @Test func whatNIOsDecoderReadsBackIsTheFrame() throws {
        let key = try #require(WebSocketMaskingKey([1, 2, 3, 4]))
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: key, data: payload(300))
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        try channel.writeInbound(WebSocketFrameWriter.encode(frame, allocator: ByteBufferAllocator()))
        let read = try #require(try channel.readInbound(as: WebSocketFrame.self))
        #expect(read.maskKey == key && read.fin && read.opcode == .text)
        #expect(read.unmaskedData == payload(300))
        _ = try channel.finish()
    }
}
