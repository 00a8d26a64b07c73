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
        /// Reading a frame header: the bytes of it seen so far.
        case header([UInt8])
        /// Inside a frame's payload; a GOAWAY's first 8 bytes are kept.
        case payload(remaining: Int, goaway: [UInt8]?)
        case closing
    }

    private static let goawayType: UInt8 = 7
    private var state: State
    /// A GOAWAY with an error went down: the connection is over (for `Stalled`).
    private(set) var sentErrorGoaway = false
    private let logger: Logger

    /// `client`: the connection is ours to an origin, and opens with the 24-byte preface.
    init(logger: Logger, client: Bool = false) {
        self.logger = logger
        state = client ? .preface(24) : .header([])
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
                state = remaining == take ? .header([]) : .preface(remaining - take)
            case var .header(seen):
                let take = min(9 - seen.count, bytes.endIndex - index)
                seen += bytes[index..<index + take]
                index += take
                guard seen.count == 9 else {
                    state = .header(seen)
                    continue
                }
                let length = Int(seen[0]) << 16 | Int(seen[1]) << 8 | Int(seen[2])
                let onConnection = seen[5] & 0x7F == 0 && seen[6] == 0 && seen[7] == 0 && seen[8] == 0
                state = .payload(remaining: length, goaway: seen[3] == Self.goawayType && onConnection && length >= 8 ? [] : nil)
                if length == 0 { state = .header([]) }
            case .payload(let remaining, var goaway):
                let take = min(remaining, bytes.endIndex - index)
                if var kept = goaway, kept.count < 8 {
                    kept += bytes[index..<index + min(take, 8 - kept.count)]
                    goaway = kept
                    if kept.count == 8, kept[4..<8].contains(where: { $0 != 0 }) { found = true }
                }
                index += take
                state = remaining - take == 0 ? .header([]) : .payload(remaining: remaining - take, goaway: goaway)
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
                state = left == 0 ? .header([]) : .payload(remaining: left, goaway: kept)
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
