import BusymateShared
import CaptureStore
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Bytes each way through one passed-through tunnel.
final class TunnelByteCounts: Sendable {
    let up = Atomic<Int>(0)
    let down = Atomic<Int>(0)
    /// What the hellos going past said: the client's SNI, the server's choices.
    let hello = Mutex(TLSHello())

    /// Glue for a client (first) and a server (second) that counts here and
    /// in `stats`; `activity` runs as bytes flow (a long tunnel keeps its
    /// device online; `PresenceTouch` keeps it to once a second); `idle`
    /// closes a tunnel that stays silent both ways.
    func gluePair(stats: TrafficStats, activity: (@Sendable () -> Void)? = nil, idle: GlueHandler.IdleLimit? = nil) -> (
        client: GlueHandler, server: GlueHandler
    ) {
        GlueHandler.matchedPair(
            onBytesFromFirst: { [self] in
                stats.received(fromClient: $0)
                up.add($0, ordering: .relaxed)
                activity?()
            },
            onBytesFromSecond: { [self] in
                stats.sent(toClient: $0)
                down.add($0, ordering: .relaxed)
                activity?()
            },
            idle: idle)
    }
}
