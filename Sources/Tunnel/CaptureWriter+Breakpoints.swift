import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import ProxyEngine
import Synchronization

/// Held messages, recorded through the sink on NIO's thread pool.
extension CaptureWriter {
    /// A held message is recorded at once (`busymate breakpoints` must see
    /// it to resolve it), on NIO's thread pool: the store may be locked for
    /// seconds, and the loop that holds the message serves other clients.
    public func recordBreakpointPause(_ event: BreakpointEvent, on eventLoop: EventLoop) -> EventLoopFuture<BreakpointEvent> {
        let repository = breakpoints
        return NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { try repository.pause(event) }
    }

    public func recordBreakpointOutcome(id: Int64, _ outcome: BreakpointEvent.Outcome, final: Data?, on eventLoop: EventLoop)
        -> EventLoopFuture<Void>
    {
        let repository = breakpoints
        return NIOThreadPool.singleton.runIfActive(eventLoop: eventLoop) { try repository.resolve(id: id, outcome, final: final) }
    }
}
