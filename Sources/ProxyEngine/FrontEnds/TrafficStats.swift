import BusymateShared
import Synchronization

/// The tunnel's counters: lock-free, bumped from every event loop.
public final class TrafficStats: Sendable {
    private let connectionsTotal = Atomic<Int>(0)
    private let connectionsActive = Atomic<Int>(0)
    private let requestsTotal = Atomic<Int>(0)
    private let bytesFromClients = Atomic<Int>(0)
    private let bytesToClients = Atomic<Int>(0)
    private let tunnelsIdleClosed = Atomic<Int>(0)
    private let rate = Mutex<(at: Double, requests: Int, perSecond: Double)>((0, 0, 0))

    public init() {}

    func connectionOpened() {
        connectionsTotal.add(1, ordering: .relaxed)
        connectionsActive.add(1, ordering: .relaxed)
    }

    func connectionClosed() { connectionsActive.subtract(1, ordering: .relaxed) }
    func requestStarted() { requestsTotal.add(1, ordering: .relaxed) }
    func received(fromClient bytes: Int) { bytesFromClients.add(bytes, ordering: .relaxed) }
    func sent(toClient bytes: Int) { bytesToClients.add(bytes, ordering: .relaxed) }
    func tunnelClosedIdle() { tunnelsIdleClosed.add(1, ordering: .relaxed) }

    public var activeConnections: Int { connectionsActive.load(ordering: .relaxed) }

    /// A snapshot; the request rate is measured between two snapshots.
    public func snapshot(now: Double) -> TrafficCounters {
        var c = TrafficCounters()
        c.connectionsTotal = connectionsTotal.load(ordering: .relaxed)
        c.connectionsActive = connectionsActive.load(ordering: .relaxed)
        c.requestsTotal = requestsTotal.load(ordering: .relaxed)
        c.bytesFromClients = bytesFromClients.load(ordering: .relaxed)
        c.bytesToClients = bytesToClients.load(ordering: .relaxed)
        c.tunnelsIdleClosed = tunnelsIdleClosed.load(ordering: .relaxed)
        let total = c.requestsTotal
        c.requestsPerSecond = rate.withLock { r in
            let elapsed = now - r.at
            if r.at == 0 {
                r = (now, total, 0)
            } else if elapsed >= 1 {
                r = (now, total, Double(total - r.requests) / elapsed)
            }
            return r.perSecond
        }
        return c
    }
}
