import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

/// Out of descriptors or memory: stop accepting for a moment (the kernel
/// keeps new clients in the backlog) while the open connections go on. NIO's
/// `AcceptBackoffHandler` only delays the next `read`, but a failed accept
/// leaves the listener registered for readability, and epoll reported it
/// again at once: the tunnel spun at 100 % CPU. Turning `autoRead` off
/// takes it out of epoll until the pause is over.
final class AcceptPause: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    static let pause = TimeAmount.milliseconds(250)
    private var paused = false

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let io = error as? IOError, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(io.errnoCode), !paused {
            paused = true
            let channel = context.channel
            try? channel.syncOptions?.setOption(.autoRead, value: false)
            context.eventLoop.assumeIsolated().scheduleTask(in: Self.pause) {
                self.paused = false
                if channel.isActive { try? channel.syncOptions?.setOption(.autoRead, value: true) }
            }
        }
        context.fireErrorCaught(error)
    }
}
