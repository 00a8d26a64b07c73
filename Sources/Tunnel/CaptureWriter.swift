import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import ProxyEngine
import Synchronization

/// The data path's `CaptureSink`: batches captured exchanges (and pins) into
/// the store, off the event loops, and posts `newTrafficCaptured`
/// (throttled) after each commit; records held messages and their outcomes
/// on NIO's thread pool. A failed commit (a
/// full disk, a locked file) keeps the batch and retries; only past
/// `maxPending` are the oldest dropped, and that is logged. An exchange with
/// body files is committed once they are closed.
public final class CaptureWriter: CaptureSink {
    struct Pending: Sendable {
        var record: ExchangeRecord
        var files: [BodyFileWriter]
    }

    let store: StoreHandle
    private var traffic: TrafficRepository { TrafficRepository(database: store.database) }
    private var pins: PinnedDomainRepository { PinnedDomainRepository(database: store.database) }
    /// Taken at each use: the store may be replaced (a corrupt file).
    var breakpoints: BreakpointRepository { BreakpointRepository(database: store.database) }
    /// What is wrong with the store now, for `status` (nil: commits work).
    private let problem = Mutex<String?>(nil)
    private let failedCommits = Atomic<Int>(0)
    let bodies: BodyStore
    private let spares: SpareBodyFiles
    private let notifier: Notifier?
    private let pending = Mutex<[Pending]>([])
    let wakeUp: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    let logger = Logger(label: "busymate.capture")
    /// `capture.max_exchanges`, applied after commits.
    private let maxExchanges = Atomic<Int>(AppSettings().maxExchanges)
    /// `capture.max_bytes`, likewise.
    private let maxBytes = Atomic<Int>(AppSettings().maxBytes)
    /// `capture.max_dns_rows`: DNS rows, kept apart.
    private let maxDNSRows = Atomic<Int>(AppSettings().maxDNSRows)
    /// `capture.body_max`: what is stored of one body.
    private let bodyMaxValue = Atomic<Int>(AppSettings().bodyMax)
    /// The store's size as last committed (nil: measure at the next commit),
    /// the last row then, and commits since it was measured: measured again
    /// now and then, in case something besides this writer changed the store.
    private let size = Mutex<(TrafficRepository.Size?, lastID: Int64?, commits: Int)>((nil, nil, 0))
    static let commitsPerMeasure = 1_000
    static let maxPending = 100_000

    public convenience init(database: CaptureDatabase, notifier: Notifier?) {
        self.init(store: StoreHandle(database), notifier: notifier)
    }

    /// How often, while capture goes on, body files no row names are swept.
    /// bodies/ is sticky: a web front's "clear" cannot remove the tunnel's
    /// files, it drops their rows and leaves the files to this sweep.
    let sweepInterval: Duration

    public init(store: StoreHandle, notifier: Notifier?, sweepInterval: Duration = .seconds(300)) {
        self.sweepInterval = sweepInterval
        self.store = store
        bodies = BodyStore(paths: store.database.paths)
        spares = SpareBodyFiles(store: bodies)
        self.notifier = notifier
        (wakes, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public var bodyMax: Int { bodyMaxValue.load(ordering: .relaxed) }

    /// In flight: `open-exchanges.json` (`OpenExchangesPublisher`).
    public let open: OpenExchanges? = OpenExchanges()

    /// A file for a body that outgrew the row; nil (the body is then stored
    /// truncated) when there is no `bodies/` to write to.
    public func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter? {
        BodyFileWriter(
            store: bodies, requestID: requestID, direction: direction, backlog: fileBacklog, spares: spares, eventLoop: eventLoop)
    }

    /// What may wait in memory for the disk, across all body files.
    static let fileBacklogLimit = 32 << 20
    let fileBacklog = BodyFileWriter.Backlog(limit: CaptureWriter.fileBacklogLimit)

    /// Exchanges submitted and not yet committed (queued or being written).
    let uncommitted = Atomic<Int>(0)
    /// Past this many uncommitted exchanges the proxy stops reading new
    /// requests until the store catches up: capture costs throughput, never
    /// exchanges or unbounded memory.
    static let highWater = 2_000

    /// Set while commits fail (a full disk): then traffic is not held back
    /// (it would stall for good); the queue keeps what it can and says so.
    private let storeFailing = Atomic<Bool>(false)

    /// True while the store is behind but working; `HTTPExchangeHandler` then holds reads.
    public var isBehind: Bool { uncommitted.load(ordering: .relaxed) > Self.highWater && !storeFailing.load(ordering: .relaxed) }

    /// Connections holding their reads until the store catches up.
    private let waiters = Mutex<[(EventLoop, @Sendable () -> Void)]>([])

    /// Runs `body` on `eventLoop` once the store is no longer behind (at
    /// once if it is not): the writer wakes held connections after each
    /// commit, and whenever it stops holding them back (a failing store, exit).
    public func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void) {
        let now = waiters.withLock { list -> Bool in
            guard isBehind else { return true }
            list.append((eventLoop, body))
            return false
        }
        if now { eventLoop.execute(body) }
    }

    /// After anything that can end `isBehind`; checked under the waiters'
    /// lock, so a connection that looked a moment ago is not missed.
    func wakeWaiters(all: Bool = false) {
        let ready = waiters.withLock { list -> [(EventLoop, @Sendable () -> Void)] in
            guard all || !isBehind else { return [] }
            defer { list.removeAll() }
            return list
        }
        for (eventLoop, body) in ready { eventLoop.execute(body) }
    }

    public func submit(_ record: ExchangeRecord, files: [BodyFileWriter]) {
        uncommitted.add(1, ordering: .relaxed)
        let dropped = pending.withLock { queue -> Int in
            queue.append(Pending(record: record, files: files))
            guard queue.count > Self.maxPending else { return 0 }
            let excess = queue.count - Self.maxPending
            queue.removeFirst(excess)
            return excess
        }
        if dropped > 0 {
            uncommitted.subtract(dropped, ordering: .relaxed)
            wakeWaiters()
            logger.error("the capture store is falling behind; dropped the oldest exchanges", metadata: ["DROPPED": "\(dropped)"])
        }
        wakeUp.yield()
    }

    /// WebSockets' events, committed after the rows queued before them (CaptureWriter+WebSockets.swift).
    let sockets = WebSocketEventQueue(limit: CaptureWriter.maxPending / 64)

    public func apply(_ settings: AppSettings) {
        maxExchanges.store(settings.maxExchanges, ordering: .relaxed)
        maxBytes.store(settings.maxBytes, ordering: .relaxed)
        maxDNSRows.store(settings.maxDNSRows, ordering: .relaxed)
        bodyMaxValue.store(settings.bodyMax, ordering: .relaxed)
        // An empty flush applies lowered limits at once.
        wakeUp.yield()
    }

    /// Pins decided on the event loops, oldest first, until a flush commits them.
    private let pendingPins = Mutex<[(host: String, reason: String, at: Date)]>([])
    static let maxPendingPins = 1_000

    /// Counts a refusal that pinned `host`. Called on the event loop of the
    /// refused handshake, so it only queues, as rows do: the store may be
    /// locked for seconds; the writer commits it with the next batch.
    public func recordPin(_ host: String, reason: String) {
        let kept = pendingPins.withLock { queue -> Bool in
            guard queue.count < Self.maxPendingPins else { return false }
            queue.append((host.lowercased(), reason, Date()))
            return true
        }
        if !kept { logger.error("too many pinned hosts wait for the capture store; one is not recorded", metadata: ["HOST": "\(host)"]) }
        wakeUp.yield()
    }

    /// Pinned hosts, with when a client last refused us for each; pins not
    /// committed yet included (a reload meanwhile must not unpin them).
    func pinnedHosts() -> [String: Date] {
        // The queue first: a pin committed between the two reads is then in one of them.
        let queued = pendingPins.withLock { $0.map { ($0.host, $0.at) } }
        let stored = ((try? pins.all()) ?? []).map { ($0.host, $0.lastSeen) }
        return Dictionary(stored + queued, uniquingKeysWith: max)
    }

    /// Commits queued pins; they stay queued (and in `pinnedHosts`) until then.
    private func savePins() async {
        let queued = pendingPins.withLock { $0 }
        guard !queued.isEmpty else { return }
        do {
            try await pins.record(queued)
            pendingPins.withLock { $0.removeFirst(min(queued.count, $0.count)) }
        } catch {
            logger.error(
                "cannot record a pinned host; keeping it to try again",
                metadata: ["HOSTS": "\(queued.count)", "ERROR": "\(StoreHealth.describe(error))"])
            try? await Task.sleep(for: .seconds(1))
            wakeUp.yield()
        }
    }

    /// Runs until `finish()`; call once. Not cancelled: a cancelled GRDB
    /// write throws, and the last batch would be lost at exit.
    public func run() async {
        sweepOrphans()
        await closeAbandonedSockets()
        let clock = ContinuousClock()
        var lastSweep = clock.now
        for await _ in wakes {
            // Let a burst gather into one transaction.
            try? await Task.sleep(for: .milliseconds(20))
            await flush()
            if clock.now - lastSweep >= sweepInterval {
                lastSweep = clock.now
                await sweepOrphansWhileCapturing()
            }
        }
        await flush()
    }

    /// What is wrong with the store, for `status`; nil while commits work.
    var storeProblem: String? { problem.withLock { $0 } }

    /// A damaged file: kept aside, a new store started, capture goes on.
    private func replaceCorruptStore(_ error: Error) -> Bool {
        let paths = store.database.paths
        do {
            let aside = try CaptureDatabase.moveAside(paths)
            store.replace(with: try CaptureDatabase(paths: paths))
            logger.critical(
                "the capture store was corrupt; moved it aside (kept, not deleted) and started a new one",
                metadata: ["ERROR": "\(StoreHealth.describe(error))", "MOVED_TO": "\(aside.path)"])
            return true
        } catch let failure {
            problem.withLock { $0 = "\(StoreHealth.describe(error)); cannot replace it: \(failure)" }
            return false
        }
    }

    /// After the last flush of a clean stop: the WAL into the store file.
    public func checkpoint() async {
        do {
            try await store.database.checkpointAndTruncate()
            logger.info("the capture store is checkpointed; capture.sqlite alone holds every exchange")
        } catch {
            // Busy: another tunnel writes it now (a restart), or a reader held on.
            logger.notice(
                "did not checkpoint the capture store at stop; its -wal file holds the latest exchanges",
                metadata: ["ERROR": "\(StoreHealth.describe(error))"])
        }
    }

    /// Ends `run()` after one last flush.
    public func finish() {
        wakeUp.finish()
        wakeWaiters(all: true)
    }

    func flush() async {
        await savePins()
        // Events first, then rows: a socket's handshake row is submitted before
        // its events, so it is in this batch (committed before them) or an earlier one.
        let events = sockets.take()
        let batch = pending.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        let retention = TrafficRepository.Retention(
            maxExchanges: maxExchanges.load(ordering: .relaxed), maxBytes: maxBytes.load(ordering: .relaxed),
            maxDNSRows: maxDNSRows.load(ordering: .relaxed))
        let (known, lastID) = size.withLock { s -> (TrafficRepository.Size?, Int64?) in
            s.commits < Self.commitsPerMeasure ? (s.0, s.lastID) : (nil, nil)
        }
        if batch.isEmpty, events.isEmpty, let known, known.exchanges <= retention.maxExchanges, known.bytes <= retention.maxBytes,
            known.dns <= retention.maxDNSRows
        {
            return
        }
        var records: [ExchangeRecord] = []
        for entry in batch { records.append(await complete(entry)) }
        do {
            let trimmed = try await traffic.save(records, sockets: events, keeping: retention, size: known, lastID: lastID)
            sockets.committed(events, gone: trimmed.goneSockets)
            size.withLock { $0 = (trimmed.size, trimmed.lastID, known == nil ? 0 : $0.commits + 1) }
            uncommitted.subtract(records.count + events.reduce(0) { $0 + $1.weight }, ordering: .relaxed)
            storeFailing.store(false, ordering: .relaxed)
            if problem.withLock({ current in
                defer { current = nil }
                return current != nil
            }) {
                let failures = failedCommits.exchange(0, ordering: .relaxed)
                logger.notice("the capture store is written again", metadata: ["AFTER_FAILURES": "\(failures)"])
            }
            wakeWaiters()
            if !records.isEmpty || !events.isEmpty { notifier?.post(.newTrafficCaptured) }
            if trimmed.removed > 0 {
                spares.retire(trimmed.files)
                logger.debug("retention removed old exchanges", metadata: ["REMOVED": "\(trimmed.removed)"])
            }
        } catch {
            // Measure again next time: the failed transaction may have been half done.
            size.withLock { $0 = (nil, nil, 0) }
            pending.withLock { $0.insert(contentsOf: records.map { Pending(record: $0, files: []) }, at: 0) }
            sockets.putBack(events)
            if StoreHealth.isCorruption(error), replaceCorruptStore(error) {
                wakeUp.yield()
                return
            }
            storeFailing.store(true, ordering: .relaxed)
            wakeWaiters()
            let waiting = pending.withLock { $0.count }
            let text = "\(StoreHealth.describe(error)); \(waiting) exchange\(waiting == 1 ? "" : "s") waiting in memory"
            let first = problem.withLock { current -> Bool in
                defer { current = text }
                return current == nil
            }
            // Once when writes start failing, then every 30 tries: not once a second.
            let failures = failedCommits.wrappingAdd(1, ordering: .relaxed).newValue
            if first || failures % 30 == 0 {
                logger.error(
                    "cannot write to the capture store; keeping the exchanges to try again",
                    metadata: ["EXCHANGES": "\(waiting)", "ERROR": "\(StoreHealth.describe(error))"])
            }
            try? await Task.sleep(for: .seconds(1))
            wakeUp.yield()
        }
    }

    /// Waits for the entry's body files and fills in what they decide:
    /// a failed file leaves the row's first bytes, flagged truncated.
    private func complete(_ entry: Pending) async -> ExchangeRecord {
        var record = entry.record
        var stored = (record.requestBody?.count ?? 0) + (record.responseBody?.count ?? 0)
        for file in entry.files {
            switch (try? await file.written.get()) ?? .failure(BodyFileError(description: "the body file was never finished")) {
            case let .success(bytes):
                stored += bytes
            case let .failure(error):
                logger.error(
                    "cannot store a body file; keeping its first bytes in the row",
                    metadata: ["REQUEST_ID": "\(record.requestID)", "ERROR": "\(error)"])
                switch file.direction {
                case .request:
                    record.requestBodyFile = nil
                    record.requestBodyTruncated = true
                case .response:
                    record.responseBodyFile = nil
                    record.responseBodyTruncated = true
                case nil:
                    break
                }
            }
        }
        record.storedBytes = stored
        record.requestBodyDecodedSize = await decodedSize(record, .request)
        record.responseBodyDecodedSize = await decodedSize(record, .response)
        return record
    }

    /// Whether stored headers name Content-Encoding, in any case: a byte scan,
    /// far cheaper than Foundation's case-insensitive search.
    static func namesContentEncoding(_ headers: String) -> Bool {
        var headers = headers
        return headers.withUTF8 { bytes in
            let needle = contentEncodingName
            guard bytes.count >= needle.count else { return false }
            // `| 0x20` lowers letters and keeps `"` and `-`.
            return (0...(bytes.count - needle.count)).contains { start in
                bytes[start] == needle[0] && (1..<needle.count).allSatisfy { bytes[start + $0] | 0x20 == needle[$0] }
            }
        }
    }

    private static let contentEncodingName = Array("\"content-encoding\"".utf8)

    /// Bodies bigger than this are not decoded just to be measured.
    static let decodeToMeasureLimit = 8 * 1024 * 1024

    private func decodedSize(_ record: ExchangeRecord, _ direction: BodyStore.Direction) async -> Int? {
        let (size, truncated, headers) =
            direction == .request
            ? (record.requestBodySize, record.requestBodyTruncated, record.requestHeaders)
            : (record.responseBodySize, record.responseBodyTruncated, record.responseHeaders)
        guard size > 0 else { return 0 }
        // Parsing the headers is the dear part: only when an encoding is named.
        guard let headers, Self.namesContentEncoding(headers) else { return size }
        let encoding = ExchangeRecord.decodeHeaders(headers).last { $0.0.lowercased() == "content-encoding" }?.1
        guard let encoding, !encoding.trimmingCharacters(in: .whitespaces).isEmpty, encoding.lowercased() != "identity" else { return size }
        guard !truncated, size <= Self.decodeToMeasureLimit else { return nil }
        // Reading a body file and inflating it block: NIO's blocking pool, as for the writes.
        let bodies = bodies
        return try? await NIOThreadPool.singleton.runIfActive {
            try bodies.body(of: record, direction).flatMap { BodyDecoder.decode($0, encoding: encoding)?.count }
        }
    }

    /// Body files no row names, untouched for an hour, of no exchange open
    /// or waiting for its commit: what the page's "clear" left (it cannot
    /// remove the tunnel's files in the sticky bodies/). Off the
    /// cooperative pool: it lists the directory and reads the store.
    private func sweepOrphansWhileCapturing() async {
        var ids = open?.requestIDs() ?? []
        pending.withLock { queue in for entry in queue { ids.insert(entry.record.requestID) } }
        let busy = ids
        let (traffic, bodies, logger) = (traffic, bodies, logger)
        let removed = try? await NIOThreadPool.singleton.runIfActive { () -> Int in
            let referenced = try traffic.bodyFiles()
            let orphans = bodies.orphans(referenced: referenced, olderThan: 3600).filter { name in
                !busy.contains(String(name.prefix { $0 != "." }))
            }
            return bodies.remove(orphans)
        }
        if let removed, removed > 0 { logger.notice("removed body files no exchange names", metadata: ["FILES": "\(removed)"]) }
    }

    /// Body files no row names, left by a tunnel that died between writing
    /// a body and committing its exchange.
    private func sweepOrphans() {
        guard let referenced = try? traffic.bodyFiles() else { return }
        let orphans = bodies.orphans(referenced: referenced)
        guard !orphans.isEmpty else { return }
        bodies.remove(orphans)
        logger.notice("removed body files no exchange names", metadata: ["FILES": "\(orphans.count)"])
    }
}
