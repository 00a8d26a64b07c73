import NIOCore
import NIOWebSocket

/// RFC 6455 §5.3's masking (its own inverse), eight bytes at a time: NIO's
/// `webSocketMask` goes a byte at a time with a modulo per byte.
enum WebSocketMasking {
    /// Masks `bytes` in place, the first byte with the key's first.
    static func apply(_ key: WebSocketMaskingKey, to bytes: UnsafeMutableRawBufferPointer) {
        var pattern: UInt64 = 0
        withUnsafeMutableBytes(of: &pattern) { word in
            for index in 0..<8 { word[index] = key[index % 4] }
        }
        let count = bytes.count
        var index = 0
        while index + 8 <= count {
            let word = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            bytes.storeBytes(of: word ^ pattern, toByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < count {
            bytes[index] ^= key[index % 4]
            index += 1
        }
    }

    /// `buffer`'s readable bytes, unmasked (or masked) in place.
    static func apply(_ key: WebSocketMaskingKey, to buffer: inout ByteBuffer) {
        buffer.withUnsafeMutableReadableBytes { apply(key, to: $0) }
    }
}
