import NIOCore
import NIOWebSocket

/// Writes a small frame as one buffer, header and payload together, masked
/// a word at a time. NIO's `WebSocketFrameEncoder` writes the header as a
/// buffer of its own whenever it cannot prepend it, which is always for a
/// payload sliced by the decoder: TLS then seals two records per frame.
/// A frame past one TLS record goes as header and payload, copied only
/// when it must be masked, as NIO's encoder does.
final class WebSocketFrameWriter: ChannelOutboundHandler {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = ByteBuffer

    /// One TLS record's plaintext: past it a frame is several records anyway.
    static let coalescedPayload = 16 * 1024

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = Self.unwrapOutboundIn(data)
        let allocator = context.channel.allocator
        if Self.payloadLength(frame) <= Self.coalescedPayload {
            context.write(Self.wrapOutboundOut(Self.encode(frame, allocator: allocator)), promise: promise)
            return
        }
        var header = allocator.buffer(capacity: 14)
        Self.writeHeader(frame, into: &header)
        context.write(Self.wrapOutboundOut(header), promise: nil)
        if let key = frame.maskKey {
            var payload = allocator.buffer(capacity: Self.payloadLength(frame))
            if let extensionData = frame.extensionData { payload.writeImmutableBuffer(extensionData) }
            payload.writeImmutableBuffer(frame.data)
            WebSocketMasking.apply(key, to: &payload)
            context.write(Self.wrapOutboundOut(payload), promise: promise)
            return
        }
        if let extensionData = frame.extensionData { context.write(Self.wrapOutboundOut(extensionData), promise: nil) }
        context.write(Self.wrapOutboundOut(frame.data), promise: promise)
    }

    static func payloadLength(_ frame: WebSocketFrame) -> Int {
        (frame.extensionData?.readableBytes ?? 0) + frame.data.readableBytes
    }

    /// The frame as it goes on the wire, in one buffer (RFC 6455 §5.2): the
    /// payload (extension data first) masked with the frame's key.
    static func encode(_ frame: WebSocketFrame, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 14 + payloadLength(frame))
        writeHeader(frame, into: &buffer)
        let payloadStart = buffer.readableBytes
        if let extensionData = frame.extensionData { buffer.writeImmutableBuffer(extensionData) }
        buffer.writeImmutableBuffer(frame.data)
        if let key = frame.maskKey {
            buffer.withUnsafeMutableReadableBytes { bytes in
                WebSocketMasking.apply(key, to: UnsafeMutableRawBufferPointer(rebasing: bytes[payloadStart...]))
            }
        }
        return buffer
    }

    /// The header: flags and opcode, the shortest length encoding, the key.
    static func writeHeader(_ frame: WebSocketFrame, into buffer: inout ByteBuffer) {
        let length = payloadLength(frame)
        var first = UInt8(webSocketOpcode: frame.opcode)
        if frame.fin { first |= 0x80 }
        if frame.rsv1 { first |= 0x40 }
        if frame.rsv2 { first |= 0x20 }
        if frame.rsv3 { first |= 0x10 }
        buffer.writeInteger(first)
        let maskBit: UInt8 = frame.maskKey == nil ? 0 : 0x80
        switch length {
        case ..<126:
            buffer.writeInteger(UInt8(length) | maskBit)
        case ...0xFFFF:
            buffer.writeInteger(126 | maskBit)
            buffer.writeInteger(UInt16(length))
        default:
            buffer.writeInteger(127 | maskBit)
            buffer.writeInteger(UInt64(length))
        }
        if let key = frame.maskKey { buffer.writeBytes(key) }
    }
}
