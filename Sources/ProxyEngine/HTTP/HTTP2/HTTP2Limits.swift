import NIOCore
import NIOHTTP2

/// What Busymate announces and enforces on each HTTP/2 connection, client
/// side and origin side. NIO's handler carries the bounds against hostile
/// peers (Rapid Reset, CONTINUATION floods, control-frame floods, HPACK
/// bombs through the header list size); they are named here so the docs
/// (docs/usage.md, "HTTP/2 and gRPC") can state them and tests can hold them.
enum HTTP2Limits {
    /// Streams a client may have open at once; more wait (the peer's own limit bounds ours towards it).
    static let maxConcurrentStreams = 100
    /// The HTTP/2 form of 431: a larger decoded header list resets the stream.
    static let maxHeaderListSize = 64 * 1024
    /// Per-stream window: what one stream may have in flight towards us
    /// while the other leg cannot take it, so memory stays bounded.
    static let streamWindow = 65_535
    /// CONTINUATION frames after a HEADERS frame before the connection is an attack (CVE-2024-27316 class).
    static let maxContinuationFrames = 5
    /// RST_STREAM frames a peer may send in `resetWindow` (Rapid Reset, CVE-2023-44487).
    static let maxResets = 200
    static let resetWindow = TimeAmount.seconds(30)

    static var serverConnection: NIOHTTP2Handler.ConnectionConfiguration {
        var config = NIOHTTP2Handler.ConnectionConfiguration()
        config.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: maxHeaderListSize),
            HTTP2Setting(parameter: .initialWindowSize, value: streamWindow),
        ]
        config.maximumSequentialContinuationFrames = maxContinuationFrames
        return config
    }

    static var clientConnection: NIOHTTP2Handler.ConnectionConfiguration {
        var config = NIOHTTP2Handler.ConnectionConfiguration()
        config.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxHeaderListSize, value: maxHeaderListSize),
            HTTP2Setting(parameter: .initialWindowSize, value: streamWindow),
        ]
        config.maximumSequentialContinuationFrames = maxContinuationFrames
        return config
    }

    static var stream: NIOHTTP2Handler.StreamConfiguration {
        var config = NIOHTTP2Handler.StreamConfiguration()
        config.targetWindowSize = streamWindow
        config.streamResetFrameRateLimit.maximumCount = maxResets
        config.streamResetFrameRateLimit.windowLength = resetWindow
        return config
    }
}
