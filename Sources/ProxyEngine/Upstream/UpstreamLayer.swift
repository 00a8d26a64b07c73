import NIOCore
import NIOHTTP1

/// The HTTP client layer of one upstream connection, as installed, and
/// the only code that adds or removes its handlers (after a `101`, when
/// the bytes are glued instead). Confined to the connection's event loop.
final class UpstreamLayer {
    let handler: UpstreamHandler
    /// The HTTP/1 codec, removed after a `101`.
    private var http1: (encoder: HTTPRequestEncoder, decoder: ByteToMessageHandler<HTTPResponseDecoder>)?
    private let validator = UpstreamRequestValidator()
    private(set) var channel: Channel?

    init(handler: UpstreamHandler) { self.handler = handler }

    func install(on channel: Channel) throws {
        self.channel = channel
        let encoder = HTTPRequestEncoder()
        // 1xx answers are passed on (Expect: 100-continue); bytes after a 101 are kept for the glue.
        let decoder = ByteToMessageHandler(
            HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes, informationalResponseStrategy: .forward))
        http1 = (encoder, decoder)
        try channel.pipeline.syncOperations.addHandlers([encoder, decoder, validator, handler])
    }

    /// What writes HTTP: out first, so the bytes the decoder hands on as it
    /// goes meet glue, not a handler that expects HTTP parts.
    func removeOutbound() {
        guard let ops = channel?.pipeline.syncOperations else { return }
        ops.removeHandler(handler, promise: nil)
        ops.removeHandler(validator, promise: nil)
        if let encoder = http1?.encoder { ops.removeHandler(encoder, promise: nil) }
    }

    func removeDecoder() {
        guard let decoder = http1?.decoder else { return }
        channel?.pipeline.syncOperations.removeHandler(decoder, promise: nil)
    }
}
