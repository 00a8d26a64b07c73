import NIOCore

/// Reads the first hello going past without holding anything back: bytes
/// are passed on as they come, a copy of the first few is parsed, and the
/// handler leaves once it knows.
final class TLSHelloSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    enum Side { case client, server }
    private enum State { case reading(ByteBuffer), done }

    private var state = State.reading(ByteBuffer())
    private let messageType: UInt8
    private let found: (TLSHello) -> Void
    /// A hello is a few KiB; past this it is not one worth waiting for.
    static let limit = 64 * 1024

    init(_ side: Side, found: @escaping (TLSHello) -> Void) {
        messageType = side == .client ? 1 : 2
        self.found = found
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case var .reading(seen) = state {
            var incoming = Self.unwrapInboundIn(data)
            seen.writeBuffer(&incoming)
            switch TLSHello.parse(seen, expecting: messageType) {
            case .incomplete where seen.readableBytes < Self.limit:
                state = .reading(seen)
            case let .found(hello):
                state = .done
                found(hello)
            default:
                state = .done
            }
        }
        context.fireChannelRead(data)
        if case .done = state { context.pipeline.syncOperations.removeHandler(self, promise: nil) }
    }
}
