import NIOCore
import NIOPosix

/// The real network, with NIO's `ClientBootstrap`.
struct SocketConnector: UpstreamConnector {
    static let connectTimeout = TimeAmount.seconds(10)

    func connect(
        _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
        initialize: @escaping @Sendable (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        ClientBootstrap(group: eventLoop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.autoRead, value: autoRead)
            .channelOption(.allowRemoteHalfClosure, value: halfClosure)
            .connectTimeout(Self.connectTimeout)
            .resolver(dial.resolver(override: override, on: eventLoop))
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try initialize(channel) } }
            .connect(host: dial.address.host, port: dial.address.port)
    }
}
