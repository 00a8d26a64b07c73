import NIOPosix
import Synchronization

/// This machine's interface addresses, for admission and the loop guard.
/// `getifaddrs` blocks (a netlink round trip), so it never runs on an event
/// loop: the tunnel reads it at start and its status tick again every few
/// seconds on NIO's thread pool; an accept reads the last list. A reader on
/// a loop that finds none, or an old one (a process without the tick),
/// gets what there is and has it read on the thread pool.
public final class LocalAddresses: Sendable {
    public static let shared = LocalAddresses()

    /// A reading older than this is read again.
    public static let maxAge: Double = 5

    private struct State {
        var addresses: Set<String> = []
        var readAt = -Double.infinity
        var refreshing = false
    }

    private let state = Mutex(State())
    /// What reads the interfaces (tests watch where it runs).
    private let read: @Sendable () -> Set<String>

    init(read: @escaping @Sendable () -> Set<String> = LoopGuard.localAddresses) {
        self.read = read
    }

    public func current(now: Double = DeviceRegistry.monotonic()) -> Set<String> {
        let onLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
        let (addresses, readOnce, stale) = state.withLock { s -> (Set<String>, Bool, Bool) in
            let readOnce = s.readAt > -.infinity
            let stale = now - s.readAt > Self.maxAge && !s.refreshing
            // Off the loops a first use reads in place; else the pool does.
            if stale && (readOnce || onLoop) { s.refreshing = true }
            return (s.addresses, readOnce, stale)
        }
        if !readOnce && !onLoop { return refresh() }
        if stale { NIOThreadPool.singleton.submit { _ in _ = self.refresh() } }
        return addresses
    }

    /// Reads the interfaces now (blocking): at start, or on the thread pool.
    @discardableResult
    public func refresh() -> Set<String> {
        let addresses = read()
        state.withLock { $0 = State(addresses: addresses, readAt: DeviceRegistry.monotonic(), refreshing: false) }
        return addresses
    }

    /// Reads them again a second before an accept would find them old
    /// (blocking: the tunnel's status tick calls it on the thread pool).
    public func refreshIfOld(now: Double = DeviceRegistry.monotonic()) {
        let old = state.withLock { now - $0.readAt >= Self.maxAge - 1 && !$0.refreshing }
        if old { refresh() }
    }
}
