import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

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
