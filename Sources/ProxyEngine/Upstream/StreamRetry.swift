import NIOCore
import NIOHTTP1
import NIOHTTP2

/// What an exchange's stream on an origin HTTP/2 connection needs to be
/// sent again on a new connection when the origin did not process it
/// (RFC 9113 §8.7: REFUSED_STREAM, from the origin or from `OriginStreams`
/// for a stream above its GOAWAY's last stream id): the parts
/// sent so far, up to a budget, and whether the answer has begun. Once.
struct StreamRetry {
    /// Request bodies larger than this are not kept: such a stream fails instead.
    static let budget = 64 * 1024

    private(set) var parts: [HTTPClientRequestPart] = []
    private var bytes = 0
    private(set) var replayable = true
    private(set) var responseBegun = false
    private(set) var retried = false
    /// The connection of the stream in use.
    private(set) var connection: UpstreamHTTP2Pool.Connection?

    mutating func sent(_ part: HTTPClientRequestPart) {
        guard replayable else { return }
        if case let .body(.byteBuffer(buffer)) = part { bytes += buffer.readableBytes }
        guard bytes <= Self.budget else {
            replayable = false
            parts = []
            return
        }
        parts.append(part)
    }

    mutating func opened(on connection: UpstreamHTTP2Pool.Connection) {
        self.connection = connection
    }

    /// The answer has begun: the stream can no longer be sent again, and its parts need not be kept.
    mutating func responseHead() {
        responseBegun = true
        dropParts()
    }

    /// An HTTP/1.1 connection: there is no stream to send again.
    mutating func notOnAStream() { dropParts() }

    private mutating func dropParts() {
        replayable = false
        parts = []
    }

    /// Whether a stream that closed with `error` was refused before its answer began, and can go again.
    func mayHaveBeenRefused(_ error: Error?) -> Bool {
        connection != nil && !responseBegun && wasRefused(error)
    }

    /// The origin did not process it: REFUSED_STREAM.
    func wasRefused(_ error: Error?) -> Bool {
        (error as? NIOHTTP2Errors.StreamClosed)?.errorCode == .refusedStream
    }

    mutating func retrying() {
        retried = true
        connection = nil
    }
}
