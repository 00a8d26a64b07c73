import BusymateShared
import CaptureStore
import Foundation
import Logging
import Synchronization

/// Batches captured exchanges into the store, off the event loops, and posts
/// `newTrafficCaptured` (throttled) after each commit. A failed commit (a
/// full disk, a locked file) keeps the batch and retries; only past
/// `maxPending` are the oldest dropped, and that is logged.
public final class CaptureWriter: Sendable {
    private let traffic: TrafficRepository
    private let pins: PinnedDomainRepository
    private let notifier: Notifier?
    private let pending = Mutex<[ExchangeRecord]>([])
    private let wakeUp: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let logger = Logger(label: "busymate.capture")
    /// `capture.max_exchanges`, applied after commits.
    private let maxExchanges = Atomic<Int>(AppSettings().maxExchanges)
    private let sincePrune = Atomic<Int>(0)
    static let maxPending = 100_000
    /// Bodies up to this size are kept in the row.
    public static let inlineBodyLimit = 16 * 1024

    public init(database: CaptureDatabase, notifier: Notifier?) {
        traffic = TrafficRepository(database: database)
        pins = PinnedDomainRepository(database: database)
        self.notifier = notifier
        (wakes, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func submit(_ record: ExchangeRecord) {
        let dropped = pending.withLock { queue -> Int in
            queue.append(record)
            guard queue.count > Self.maxPending else { return 0 }
            let excess = queue.count - Self.maxPending
            queue.removeFirst(excess)
            return excess
        }
        if dropped > 0 { logger.error("the capture store is falling behind; dropped the oldest exchanges", metadata: ["DROPPED": "\(dropped)"]) }
        wakeUp.yield()
    }

    public func apply(_ settings: AppSettings) {
        maxExchanges.store(settings.maxExchanges, ordering: .relaxed)
        sincePrune.store(Int.max / 2, ordering: .relaxed)
        wakeUp.yield()
    }

    /// Retention costs a query: run it once per ~1% of the limit written.
    private func pruneIfDue(added: Int) async {
        let limit = maxExchanges.load(ordering: .relaxed)
        let due = sincePrune.add(added, ordering: .relaxed).newValue >= max(1, limit / 100)
        guard due else { return }
        sincePrune.store(0, ordering: .relaxed)
        do {
            let removed = try await traffic.prune(maxExchanges: limit)
            if removed > 0 { logger.debug("retention removed old exchanges", metadata: ["REMOVED": "\(removed)"]) }
        } catch {
            logger.error("retention failed", metadata: ["ERROR": "\(error)"])
        }
    }

    func recordPin(_ host: String, reason: String) {
        do {
            try pins.record(host, reason: reason)
        } catch {
            logger.error("cannot record a pinned host", metadata: ["HOST": "\(host)", "ERROR": "\(error)"])
        }
    }

    func pinnedHosts() -> Set<String> {
        Set(((try? pins.all()) ?? []).map(\.host))
    }

    /// Runs until `finish()`; call once. Not cancelled: a cancelled GRDB
    /// write throws, and the last batch would be lost at exit.
    public func run() async {
        for await _ in wakes {
            // Let a burst gather into one transaction.
            try? await Task.sleep(for: .milliseconds(20))
            await flush()
        }
        await flush()
    }

    /// Ends `run()` after one last flush.
    public func finish() { wakeUp.finish() }

    func flush() async {
        let batch = pending.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        guard !batch.isEmpty else {
            await pruneIfDue(added: 0)
            return
        }
        do {
            try await traffic.save(batch)
            notifier?.post(.newTrafficCaptured)
            await pruneIfDue(added: batch.count)
        } catch {
            logger.error("cannot write to the capture store; keeping the exchanges to try again", metadata: ["EXCHANGES": "\(batch.count)", "ERROR": "\(error)"])
            pending.withLock { $0.insert(contentsOf: batch, at: 0) }
            try? await Task.sleep(for: .seconds(1))
            wakeUp.yield()
        }
    }
}
