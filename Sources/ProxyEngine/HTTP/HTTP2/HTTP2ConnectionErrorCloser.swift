import Logging
import NIOCore
import NIOHTTP2

/// Closes an HTTP/2 connection, a client's or an origin's, once it has been
/// told why. NIO's HTTP/2 handler answers a connection error (Rapid Reset,
/// a CONTINUATION flood, a control-frame flood, a broken frame) with a
/// GOAWAY and an error, but leaves the socket open; RFC 9113 §5.4.1 says to close it
/// after that GOAWAY, and until then an attacker holds the connection and
/// whatever its streams hold. Sits on the bytes below NIO's handler and
/// follows their frame boundaries: a GOAWAY with an error code closes the
/// connection once it is written (a graceful one, NO_ERROR, lets the open
/// streams finish). A client that does not read never gets that GOAWAY (it
/// waits in NIO's bounded buffer): `Stalled` closes that one.
final class HTTP2ConnectionErrorCloser {
    private enum State {
        /// A client's connection preface, before its first frame: the bytes of it still to come.
        case preface(Int)
        /// Reading a frame header: what of it has been seen.
        case header(FrameHeader)
        /// Inside a frame's payload; for a GOAWAY, how much of its first 8 bytes has gone by.
        case payload(remaining: Int, goaway: GoawayStart?)
        case closing
    }

    /// A frame header taken a byte at a time (no buffer: this sees every frame sent).
    struct FrameHeader {
        var seen = 0
        var length = 0
        var type: UInt8 = 0
        var streamIDIsZero = true

        mutating func take(_ byte: UInt8) {
            switch seen {
            case 0...2: length = length << 8 | Int(byte)
            case 3: type = byte
            case 5: streamIDIsZero = byte & 0x7F == 0
            case 6...8: streamIDIsZero = streamIDIsZero && byte == 0
            default: break
            }
            seen += 1
        }
    }

    /// A GOAWAY's last stream id (4 bytes) and error code (4 bytes), as they go by.
    struct GoawayStart {
        var seen = 0
        var hasError = false
    }

    private static let goawayType: UInt8 = 7
    private var state: State
    /// A GOAWAY with an error went down: the connection is over (for `Stalled`).
    private(set) var sentErrorGoaway = false
    private let logger: Logger

    /// `client`: the connection is ours to an origin, and opens with the 24-byte preface.
    init(logger: Logger, client: Bool = false) {
        self.logger = logger
        state = client ? .preface(24) : .header(FrameHeader())
    }

    /// Follows `bytes` through the frames; true when they end a GOAWAY that carries an error.
    private func endsErrorGoaway(_ bytes: ByteBufferView) -> Bool {
        var index = bytes.startIndex
        var found = false
        while index < bytes.endIndex {
            switch state {
            case .closing:
                return found
            case let .preface(remaining):
                let take = min(remaining, bytes.endIndex - index)
                index += take
                state = remaining == take ? .header(FrameHeader()) : .preface(remaining - take)
            case var .header(header):
                while header.seen < 9, index < bytes.endIndex {
                    header.take(bytes[index])
                    index += 1
                }
                guard header.seen == 9 else {
                    state = .header(header)
                    continue
                }
                let goaway = header.type == Self.goawayType && header.streamIDIsZero && header.length >= 8
                state =
                    header.length == 0 ? .header(FrameHeader()) : .payload(remaining: header.length, goaway: goaway ? GoawayStart() : nil)
            case .payload(let remaining, var goaway):
                let take = min(remaining, bytes.endIndex - index)
                if var start = goaway, start.seen < 8 {
                    let end = index + min(take, 8 - start.seen)
                    for position in index..<end {
                        // Bytes 4 to 7 are the error code.
                        if start.seen >= 4, bytes[position] != 0 { start.hasError = true }
                        start.seen += 1
                    }
                    goaway = start
                    if start.seen == 8, start.hasError { found = true }
                }
                index += take
                state = remaining - take == 0 ? .header(FrameHeader()) : .payload(remaining: remaining - take, goaway: goaway)
            }
        }
        return found
    }

    private func close(context: ChannelHandlerContext, _ why: String) {
        if case .closing = state { return }
        state = .closing
        logger.debug("closing an HTTP/2 connection after a connection error", metadata: ["WHY": "\(why)"])
        context.close(promise: nil)
    }
}

extension HTTP2ConnectionErrorCloser: ChannelDuplexHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let goaway: Bool
        switch unwrapOutboundIn(data) {
        case let .byteBuffer(buffer):
            goaway = endsErrorGoaway(buffer.readableBytesView)
        case let .fileRegion(region):
            // Only ever a DATA frame's payload: its bytes are skipped, and the frames after it still line up.
            if case let .payload(remaining, kept) = state {
                let left = max(0, remaining - region.readableBytes)
                state = left == 0 ? .header(FrameHeader()) : .payload(remaining: left, goaway: kept)
            }
            goaway = false
        }
        guard goaway else {
            context.write(data, promise: promise)
            return
        }
        sentErrorGoaway = true
        // Close once the GOAWAY is out: closing first would drop it.
        let written = promise ?? context.eventLoop.makePromise()
        context.write(data, promise: written)
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { _ in
            let (closer, context) = bound.value
            closer.close(context: context, "sent GOAWAY with an error")
        }
    }
}

extension HTTP2ConnectionErrorCloser {
    /// At the end of the connection's pipeline, where NIO's handler reports
    /// its errors: a connection error (its GOAWAY went down) while the peer
    /// does not read closes the connection, as that GOAWAY cannot reach it.
    /// One stream's error (a RST_STREAM) leaves the connection alone: in a
    /// back-pressured download the other streams go on.
    final class Stalled: ChannelInboundHandler {
        typealias InboundIn = NIOAny
        private let logger: Logger
        private let closer: HTTP2ConnectionErrorCloser

        init(logger: Logger, closer: HTTP2ConnectionErrorCloser) {
            self.logger = logger
            self.closer = closer
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            // A peer that reads nothing overflows NIO's frame buffer: a connection error whose GOAWAY
            // may not be sent at all (a drain's GOAWAY came first).
            let connectionError = closer.sentErrorGoaway || error is NIOHTTP2Errors.ExcessiveOutboundFrameBuffering
            if connectionError, !context.channel.isWritable, context.channel.isActive {
                logger.debug("closing an HTTP/2 connection that does not read after an error", metadata: ["ERROR": "\(error)"])
                context.close(promise: nil)
            }
            context.fireErrorCaught(error)
        }
    }
}
