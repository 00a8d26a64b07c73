import NIOCore
import NIOWebSocket

/// Writes each frame as one buffer, header and payload together, masked a
/// word at a time. NIO's `WebSocketFrameEncoder` writes the header as a
/// buffer of its own whenever it cannot prepend it, which is always for a
/// payload sliced by the decoder: TLS then seals two records per frame.
final class WebSocketFrameWriter: ChannelOutboundHandler {
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = ByteBuffer

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = Self.unwrapOutboundIn(data)
        context.write(Self.wrapOutboundOut(Self.encode(frame, allocator: context.channel.allocator)), promise: promise)
    }

    /// The frame as it goes on the wire (RFC 6455 §5.2): the shortest length
    /// encoding, the payload (extension data first) masked with the frame's key.
    static func encode(_ frame: WebSocketFrame, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = (frame.extensionData?.readableBytes ?? 0) + frame.data.readableBytes
        var buffer = allocator.buffer(capacity: 14 + length)
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
}
