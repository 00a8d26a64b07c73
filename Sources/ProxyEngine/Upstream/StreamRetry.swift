import NIOCore
import NIOHTTP1
import NIOHTTP2

/// What an exchange's stream on an origin HTTP/2 connection needs to be
/// sent again on a new connection when the origin did not process it
/// (RFC 9113 §8.7: a GOAWAY below its id, or REFUSED_STREAM): the parts
/// sent so far, up to a budget, and whether the answer has begun. Once.
struct StreamRetry {
    /// Request bodies larger than this are not kept: such a stream fails instead.
    static let budget = 64 * 1024

    private(set) var parts: [HTTPClientRequestPart] = []
    private var bytes = 0
    private(set) var replayable = true
    private(set) var responseBegun = false
    private(set) var retried = false
    /// The stream in use: its connection and id.
    private(set) var connection: UpstreamHTTP2Pool.Connection?
    private(set) var streamID: HTTP2StreamID?
    /// The origin's GOAWAY left this stream out while it waited behind the origin's stream limit.
    var refusedByGoaway = false

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

    mutating func opened(on connection: UpstreamHTTP2Pool.Connection, id: HTTP2StreamID?) {
        self.connection = connection
        streamID = id
        refusedByGoaway = false
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

    /// Whether a stream that closed with `error` may have been refused: decided once the GOAWAY (if any) is read.
    func mayHaveBeenRefused(_ error: Error?) -> Bool {
        guard let connection, !responseBegun else { return false }
        return refusedByGoaway || error is NIOHTTP2Errors.StreamClosed || connection.goaway.value != nil
    }

    /// The origin did not process it: REFUSED_STREAM, or a GOAWAY whose last stream id is below it.
    func wasRefused(_ error: Error?) -> Bool {
        if refusedByGoaway { return true }
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream { return true }
        guard let last = connection?.goaway.value, let streamID else { return false }
        return streamID > last
    }

    mutating func retrying() {
        retried = true
        connection = nil
        streamID = nil
    }
}
