import NIOCore
import NIOHTTP2

/// Below NIO's HTTP/1-to-HTTP/2 server codec on a client stream: a response
/// head followed at once by its end (a bodyless answer: gRPC's trailers-only
/// error replies above all) goes out as one HEADERS frame with END_STREAM,
/// as the origin sent it. The codec alone writes HEADERS and then an empty
/// DATA frame, and gRPC clients then find no status and report INTERNAL.
final class HeadersEndMerger: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    /// A HEADERS frame without END_STREAM, held until the next write or flush.
    private var held: (headers: HTTP2Frame.FramePayload.Headers, promise: EventLoopPromise<Void>?)?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let payload = Self.unwrapOutboundIn(data)
        if let (headers, heldPromise) = held {
            held = nil
            if case let .data(end) = payload, end.endStream, end.data.readableBytes == 0 {
                var merged = headers
                merged.endStream = true
                let written = heldPromise ?? promise
                if let heldPromise, let promise { heldPromise.futureResult.cascade(to: promise) }
                context.write(Self.wrapOutboundOut(.headers(merged)), promise: written)
                return
            }
            context.write(Self.wrapOutboundOut(.headers(headers)), promise: heldPromise)
        }
        if case let .headers(headers) = payload, !headers.endStream {
            held = (headers, promise)
            return
        }
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        if let (headers, promise) = held {
            held = nil
            context.write(Self.wrapOutboundOut(.headers(headers)), promise: promise)
        }
        context.flush()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let (_, promise) = held {
            held = nil
            promise?.fail(ChannelError.ioOnClosedChannel)
        }
    }
}
