import NIOCore

/// `CONNECT host:port` to an HTTP proxy over raw bytes, for clients of the
/// proxy (`busymate resend`, the benchmark's load generator): added first,
/// it sends the request, waits for `200`, and leaves the pipeline.
public final class ConnectPreamble: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer

    private var seen = ByteBuffer()
    private let authority: String
    private let done: EventLoopPromise<Void>

    /// Adds the handler first in `channel`'s pipeline (on its event loop),
    /// which sends the CONNECT; the future succeeds once the tunnel is open.
    /// `headers`: e.g. `Proxy-Authorization` for a proxy that wants it.
    public static func open(_ authority: String, headers: [(String, String)] = [], on channel: Channel) -> EventLoopFuture<Void> {
        let done = channel.eventLoop.makePromise(of: Void.self)
        let request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n" + headers.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        channel.eventLoop.execute {
            do {
                try channel.pipeline.syncOperations.addHandler(ConnectPreamble(authority, request: request, done), position: .first)
            } catch {
                done.fail(error)
            }
        }
        return done.futureResult
    }

    private let request: String

    private init(_ authority: String, request: String, _ done: EventLoopPromise<Void>) {
        self.authority = authority
        self.request = request
        self.done = done
    }

    /// Written from here, the head of the pipeline: the handlers behind it
    /// (an HTTP encoder, say) never see these bytes.
    public func handlerAdded(context: ChannelHandlerContext) {
        context.writeAndFlush(NIOAny(ByteBuffer(string: request)), promise: nil)
        // For channels that do not read by themselves (autoRead off).
        context.read()
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
