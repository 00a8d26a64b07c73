import NIOPosix
import Synchronization

/// This machine's interface addresses, for admission and the loop guard.
/// `getifaddrs` blocks (netlink), so readers on an event loop get the last
/// reading at once, and one older than 5 s is read again on NIO's thread
/// pool. The tunnel reads it at start, off the loops; a process that never
/// did reads it on first use.
public final class LocalAddresses: Sendable {
    public static let shared = LocalAddresses()

    private struct State {
        var addresses: Set<String> = []
        var readAt = -Double.infinity
        var refreshing = false
    }

    private let state = Mutex(State())

    public func current(now: Double = DeviceRegistry.monotonic()) -> Set<String> {
        let (addresses, read, stale) = state.withLock { s -> (Set<String>, Bool, Bool) in
            let stale = now - s.readAt > 5 && !s.refreshing
            if stale && s.readAt > -.infinity { s.refreshing = true }
            return (s.addresses, s.readAt > -.infinity, stale)
        }
        guard read else { return refresh() }
        if stale { NIOThreadPool.singleton.submit { _ in _ = self.refresh() } }
        return addresses
    }

    /// Reads the interfaces now (blocking): at start, or on the thread pool.
    @discardableResult
    public func refresh() -> Set<String> {
        let addresses = LoopGuard.localAddresses()
        state.withLock { $0 = State(addresses: addresses, readAt: DeviceRegistry.monotonic(), refreshing: false) }
        return addresses
    }
}
