import NIOCore

/// `CONNECT host:port` to an HTTP proxy over raw bytes, for clients of the
/// proxy (`busymate resend`, the benchmark's load generator): added first,
/// it sends the request, waits for `200`, and leaves the pipeline.
public final class ConnectPreamble: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer

    private var seen = ByteBuffer()
    private let authority: String
    private let done: EventLoopPromise<Void>

    /// Adds the handler to `channel`'s pipeline (on its event loop) and sends
    /// the CONNECT; the future succeeds once the tunnel is open.
    public static func open(_ authority: String, on channel: Channel) -> EventLoopFuture<Void> {
        let done = channel.eventLoop.makePromise(of: Void.self)
        channel.eventLoop.execute {
            do {
                try channel.pipeline.syncOperations.addHandler(ConnectPreamble(authority, done), position: .first)
                channel.writeAndFlush(ByteBuffer(string: "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n"), promise: nil)
            } catch {
                done.fail(error)
            }
        }
        return done.futureResult
    }

    private init(_ authority: String, _ done: EventLoopPromise<Void>) {
        self.authority = authority
        self.done = done
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = Self.unwrapInboundIn(data)
        seen.writeBuffer(&incoming)
        let view = seen.readableBytesView
        guard let end = view.firstRange(of: [13, 10, 13, 10]) else {
            if seen.readableBytes > 16 * 1024 { fail(context, "the proxy's answer to CONNECT has no end") }
            return
        }
        let statusLine = String(decoding: view[view.startIndex..<end.lowerBound], as: UTF8.self).split(separator: "\r\n").first ?? ""
        guard statusLine.split(separator: " ").dropFirst().first == "200" else {
            fail(context, "the proxy refused CONNECT \(authority): \(statusLine)")
            return
        }
        // Nothing follows a 200 until the client speaks.
        guard end.upperBound == view.endIndex else {
            fail(context, "the proxy sent bytes after its 200 to CONNECT")
            return
        }
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
        done.succeed()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        done.fail(ProxyClientError(description: "the proxy closed the connection during CONNECT"))
        context.fireChannelInactive()
    }

    public func errorCaught(context: ChannelHandlerContext, error: Error) {
        done.fail(error)
        context.close(promise: nil)
    }

    private func fail(_ context: ChannelHandlerContext, _ why: String) {
        done.fail(ProxyClientError(description: why))
        context.close(promise: nil)
    }
}

public struct ProxyClientError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
