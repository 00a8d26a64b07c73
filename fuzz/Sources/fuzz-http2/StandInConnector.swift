import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// Dials nothing: each dial opens at once onto an EmbeddedChannel (the
/// origin) with the tunnel's own upstream handlers installed, so a stream's
/// request goes out and an answer can come back.
final class StandInConnector: UpstreamConnector, @unchecked Sendable {
    // @unchecked: used on the one EmbeddedEventLoop of one run.
    let loop: EmbeddedEventLoop
    var origins: [EmbeddedChannel] = []
    /// Origins already sent their answer.
    var answered = 0

    init(loop: EmbeddedEventLoop) { self.loop = loop }

    func connect(
        _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
        initialize: @escaping @Sendable (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        let origin = EmbeddedChannel(loop: loop)
        do {
            try initialize(origin)
        } catch {
            return loop.makeFailedFuture(error)
        }
        origins.append(origin)
        if let address = try? SocketAddress(ipAddress: "127.0.0.1", port: 80) { origin.connect(to: address, promise: nil) }
        return loop.makeSucceededFuture(origin)
    }

    /// Each origin not yet heard from answers a small response (with a
    /// body, so the DATA path back to the client runs too).
    func answer() {
        while answered < origins.count {
            let origin = origins[answered]
            answered += 1
            guard origin.isActive else { continue }
            _ = try? origin.writeInbound(ByteBuffer(string: "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx-origin: 1\r\n\r\nhello"))
        }
    }
}
