import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix

/// The explicit proxy: serves listening sockets the supervisor bound and
/// handed over, and drains them on request.
public final class ProxyServer: Sendable {
    public let stats = TrafficStats()
    private let group: MultiThreadedEventLoopGroup
    private let quiesce: ServerQuiescingHelper
    private let logger = Logger(label: "busymate.proxy")

    public init(group: MultiThreadedEventLoopGroup) {
        self.group = group
        quiesce = ServerQuiescingHelper(group: group)
    }

    /// Starts accepting on `descriptor` (already bound and listening); NIO
    /// owns the descriptor from here on.
    public func serve(descriptor: Int32) async throws -> Channel {
        let stats = self.stats
        let connectLogger = Logger(label: "busymate.connect")
        return try await ServerBootstrap(group: group)
            .serverChannelInitializer { [quiesce] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: channel))
                    try channel.pipeline.syncOperations.addHandler(AcceptErrorLogger())
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try Self.configureClientPipeline(channel.pipeline.syncOperations, logger: connectLogger, stats: stats)
                }
            }
            .withBoundSocket(descriptor)
            .get()
    }

    /// The pipeline of one client connection.
    static func configureClientPipeline(_ ops: ChannelPipeline.SynchronousOperations, logger: Logger, stats: TrafficStats) throws {
        var encoderConfig = HTTPResponseEncoder.Configuration()
        // HTTPForwardHandler frames responses itself: only it knows which
        // answer a HEAD.
        encoderConfig.automaticallySetFramingHeaders = false
        try ops.addHandler(ConnectionCounter(stats: stats))
        try ops.addHandler(HTTPResponseEncoder(configuration: encoderConfig))
        try ops.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)))
        try ops.addHandler(HTTPServerPipelineHandler())
        try ops.addHandler(HTTPServerProtocolErrorHandler())
        try ops.addHandler(ConnectHandler(logger: logger, stats: stats))
        try ops.addHandler(HTTPForwardHandler(logger: logger, stats: stats))
    }

    /// Stops accepting everywhere, asks idle keep-alive connections to close
    /// and waits for the rest, at most `grace`.
    public func drain(grace: Duration) async {
        let promise = group.next().makePromise(of: Void.self)
        quiesce.initiateShutdown(promise: promise)
        let done = promise.futureResult
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try? await done.get() }
            tasks.addTask { try? await Task.sleep(for: grace) }
            await tasks.next()
            tasks.cancelAll()
        }
        if stats.activeConnections > 0 {
            logger.notice("drain grace period over; closing the remaining connections", metadata: ["CONNECTIONS": "\(stats.activeConnections)"])
        }
    }
}

/// Counts connections for `status`.
final class ConnectionCounter: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    private let stats: TrafficStats
    init(stats: TrafficStats) { self.stats = stats }

    func channelActive(context: ChannelHandlerContext) {
        stats.connectionOpened()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stats.connectionClosed()
        context.fireChannelInactive()
    }
}

/// A failed accept or child set-up only shows as an error on the server
/// channel; say so instead of losing it.
final class AcceptErrorLogger: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    private let logger = Logger(label: "busymate.proxy")

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        logger.error("cannot accept a connection", metadata: ["ERROR": "\(error)"])
    }
}
