import CompressNIO
import NIOCore

/// One direction's `permessage-deflate` stream: each message's fragments
/// are raw DEFLATE, and the window carries over from message to message
/// unless the sender resets it (either way, one stream reads it right).
/// A message that inflates past `limit` is refused: a deflate bomb ends
/// its socket, not the tunnel.
final class MessageInflater {
    private let stream: ZlibDecompressor
    let limit: Int
    /// Inflated so far in the current message.
    private(set) var produced = 0

    /// RFC 7692 §7.2.2: the sender removed these four bytes from each message's end.
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    init(limit: Int) throws {
        stream = try ZlibDecompressor(algorithm: .deflate, windowSize: 15)
        self.limit = limit
    }

    /// Inflates one fragment's bytes (and, at the message's `last`, its tail).
    /// The current message ended its DEFLATE stream (a final block): what
    /// follows it in the message, the tail included, is not read, and the
    /// next message starts a new stream.
    private var ended = false

    func inflate(_ input: ByteBuffer, last: Bool, allocator: ByteBufferAllocator) throws(WebSocketViolation) -> ByteBuffer {
        var out = allocator.buffer(capacity: min(max(input.readableBytes * 4, 256), 1 << 16))
        var input = input
        if !ended { try drain(&input, into: &out) }
        if last {
            if !ended {
                var tail = allocator.buffer(bytes: Self.tail)
                try drain(&tail, into: &out)
            }
            produced = 0
            ended = false
        }
        return out
    }

    private func drain(_ input: inout ByteBuffer, into out: inout ByteBuffer) throws(WebSocketViolation) {
        while input.readableBytes > 0 {
            if out.writableBytes < 1024 { out.reserveCapacity(minimumWritableBytes: min(max(out.readableBytes, 4096), 1 << 20)) }
            let before = out.readableBytes
            let left = input.readableBytes
            do {
                try stream.inflate(from: &input, to: &out)
            } catch let error as CompressNIOError where error == .bufferOverflow {
                // The output filled: room is made above and it goes on.
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                // All input taken and nothing more to give.
                produced += out.readableBytes - before
                break
            } catch {
                throw .badCompression("\(error)")
            }
            produced += out.readableBytes - before
            if produced > limit { throw .tooBig(limit) }
            if input.readableBytes == left && out.readableBytes == before {
                // A final block ended the stream (a sender may set BFINAL).
                guard (try? stream.reset()) != nil else { throw .badCompression("the stream cannot be started again") }
                ended = true
                input.moveReaderIndex(to: input.writerIndex)
            }
        }
    }
}
