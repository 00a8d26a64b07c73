import AsyncHTTPClient
import BusymateShared
import CLinux
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOPosix

/// A cloud sink of the tunnel's: the store is its outbox. It reads rows
/// after its cursor, sends them in batches (at most 500 rows or 1 MB) to
/// the account's PostgREST or a team's PostgreSQL, and moves the cursor
/// only once the server has them. Offline, it backs off and the rows wait
/// in the store; a credential the server refuses stops it until it changes
/// (`busymate pair` again).
public actor CloudSink {
    public static let maxBatchRows = 500
    public static let maxBatchBytes = 1 << 20

    private let store: StoreHandle
    /// The store's database the cursor was read from: a corrupt store set
    /// aside for a new one restarts its ids, and the cursor is read again.
    private var cursorDatabase: CaptureDatabase?
    private var outbox: CloudOutbox { CloudOutbox(database: store.database, sink: source.name) }
    private let rows: EntryRowsFactory
    private let source: SinkSource
    private let group: MultiThreadedEventLoopGroup
    /// Reads and encodes batches (SCHED_IDLE).
    private let worker: NIOThreadPool
    private let client: HTTPClient
    private let logger = Logger(label: "busymate.cloud")
    private let requestTimeout: TimeAmount
    /// At a stop: another tunnel serves the group now.
    private let isReplaced: @Sendable () -> Bool

    /// The configuration as last read (nil: not read yet).
    private var loaded: SinkSource.Loaded?
    /// The credential a 401 came back for: nothing is sent with it again.
    private var refusedCredential: String?
    private var cursor: CloudOutbox.Cursor?
    private var cursorAccount: String?
    private var batchLimit = CloudSink.maxBatchRows
    /// After a 413 the batch does not grow again for ten minutes: a
    /// gateway's limit does not move between two batches.
    private var growAfter = Date.distantPast
    private var backoff = SinkBackoff()
    private var current: CloudSinkStatus
    private var wakes = 0
    private var stopping = false
    private var mode = "proxy"
    /// What `device_status` was last told (online, vpn state, for which token).
    private var reported: String?
    private var sentTimes: [(at: Date, rows: Int)] = []
    private var offSince: Date?
    private var forgotten = false
    private var backlogReadAt = Date.distantPast

    public init(
        _ source: SinkSource, store: StoreHandle, paths: GroupPaths, requestTimeout: TimeAmount = .seconds(30),
        isReplaced: @escaping @Sendable () -> Bool = { false }
    ) {
        self.source = source
        self.isReplaced = isReplaced
        self.store = store
        rows = EntryRowsFactory(bodies: BodyStore(paths: paths))
        self.requestTimeout = requestTimeout
        // Its own thread: the cloud's I/O never queues behind the data path's.
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        worker = NIOThreadPool(numberOfThreads: 1)
        worker.start()
        // Both of the sink's threads run only when their core has nothing
        // else to run: the cloud waits for the data path, never the reverse.
        worker.submit { _ in _ = busymate_idle_thread() }
        group.any().execute { _ = busymate_idle_thread() }
        client = HTTPClient(
            eventLoopGroup: group,
            configuration: HTTPClient.Configuration(
                redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: requestTimeout)))
        current = CloudSinkStatus(sink: source.name, state: .off)
    }

    // MARK: from the tunnel

    /// The configuration file changed (paired, re-paired, unpaired; a team
    /// database set or removed).
    public func reloadToken() async {
        let previous = config
        let previousProblem: String?
        if case let .problem(why)? = loaded { previousProblem = why } else { previousProblem = nil }
        // Swapped before any await: a step running meanwhile sees the new one.
        let next = source.load(client: client, eventLoop: group.any(), timeout: requestTimeout)
        loaded = next
        let sameCredential = config?.credential != nil && config?.credential == previous?.credential
        if !sameCredential {
            reported = nil
            batchLimit = Self.maxBatchRows
            growAfter = .distantPast
            backoff.reset()
        }
        wakes += 1
        switch next {
        case let .ready(config) where !sameCredential:
            logger.info(
                "the cloud sink sends to \(config.target.name)",
                metadata: ["SINK": "\(source.name)", "DEVICE_UUID": "\(config.deviceUUID)"])
        case let .off(why) where previous != nil:
            logger.info("the cloud sink is off: \(why)", metadata: ["SINK": "\(source.name)"])
        case let .problem(why) where why != previousProblem:
            logger.warning("the cloud sink cannot send: \(why)", metadata: ["SINK": "\(source.name)"])
        default:
            break
        }
        if let previous, !sameCredential { await previous.target.close() }
    }

    private var config: SinkConfig? {
        if case let .ready(config)? = loaded { return config }
        return nil
    }

    /// The capture mode, for `device_status.vpn_state`.
    public func setMode(_ mode: String) {
        guard mode != self.mode else { return }
        self.mode = mode
        reported = nil
        wakes += 1
    }

    public func status() async -> CloudSinkStatus? {
        switch loaded {
        case nil, .off?: return nil
        default: break
        }
        var status = current
        let now = Date()
        sentTimes.removeAll { now.timeIntervalSince($0.at) > 10 }
        status.rowsPerSecond = Double(sentTimes.reduce(0) { $0 + $1.rows }) / 10
        status.batchLimit = batchLimit
        status.failures = backoff.failures
        if let cursor {
            status.sentID = cursor.sentID
            if now.timeIntervalSince(backlogReadAt) > 1, let backlog = try? await outbox.backlog(after: cursor.sentID) {
                backlogReadAt = now
                current.backlog = backlog.rows
                current.lagSeconds = backlog.oldest.map { max(0, now.timeIntervalSince($0)) }
                if let fresh = try? await outbox.cursor() {
                    if fresh.droppedUnsent > (current.droppedUnsent ?? fresh.droppedUnsent) {
                        logger.warning(
                            "retention removed rows the cloud sink had not sent yet; they stay lost to the cloud",
                            metadata: [
                                "DROPPED": "\(fresh.droppedUnsent - (current.droppedUnsent ?? 0))",
                                "DROPPED_TOTAL": "\(fresh.droppedUnsent)",
                            ])
                    }
                    current.droppedUnsent = fresh.droppedUnsent
                    current.rejected = fresh.rejected
                }
            }
            status.backlog = current.backlog
            status.lagSeconds = current.lagSeconds
            status.droppedUnsent = current.droppedUnsent
            status.rejected = current.rejected
        }
        return status
    }

    /// A graceful stop: tells `device_status` the device went offline (two
    /// seconds at most), then ends `run`.
    public func stop() async {
        stopping = true
        wakes += 1
        // A tunnel replaced by another (a restart, an upgrade) is not the device going offline.
        if let config, refusedCredential != config.credential, !isReplaced() {
            let state = vpnState
            // Two seconds at most: a stop does not wait on the cloud.
            _ = try? await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { _ = await config.target.upsertStatus(deviceUUID: config.deviceUUID, online: false, vpnState: state) }
                tasks.addTask { try await Task.sleep(for: .seconds(2)) }
                try await tasks.next()
                tasks.cancelAll()
            }
        }
    }

    public func shutdown() async {
        await config?.target.close()
        try? await client.shutdown()
        try? await worker.shutdownGracefully()
        try? await group.shutdownGracefully()
    }

    // MARK: the loop

    public func run() async {
        if loaded == nil { await reloadToken() }
        while !Task.isCancelled && !stopping {
            await step()
        }
    }

    private func step() async {
        let config: SinkConfig
        switch loaded {
        case let .off(why)?:
            set(.off, why)
            cursor = nil
            // Unpaired (for longer than the supervisor takes to write a
            // removed mirror again): the cursor goes, so a later pairing
            // does not send what was captured meanwhile.
            if offSince == nil { offSince = Date() }
            if let since = offSince, Date().timeIntervalSince(since) > 10, !forgotten {
                forgotten = (try? await outbox.forget()) != nil
            }
            await pause(5)
            return
        case let .problem(why)?:
            // An expired or foreign token is the pairing's problem; a bad team database URL is not.
            set(source.name == "postgrest" ? .rePairRequired : .refused, why)
            await pause(5)
            // An unreadable file (being replaced) is read again.
            await reloadToken()
            return
        case nil:
            await reloadToken()
            return
        case let .ready(ready)?:
            config = ready
            offSince = nil
            forgotten = false
        }
        if refusedCredential == config.credential {
            await pause(5)
            return
        }
        current.target = config.target.name
        do {
            // Before anything goes over the network: a new account's cursor
            // starts where the store is when the pairing is read.
            let database = store.database
            if cursor == nil || cursorAccount != config.account || cursorDatabase !== database {
                // A store set aside (corrupt) for a new one: everything in the new one came after the pairing.
                let replaced = cursorDatabase != nil && cursorDatabase !== database
                cursor = try await outbox.open(account: config.account, since: replaced ? .distantPast : config.since)
                cursorAccount = config.account
                cursorDatabase = database
            }
            switch await reportStatus(config) {
            case nil, .accepted?, .refused?, .tooLarge?, .rowRejected?:
                // A report the server will not take (no device_status table,
                // a policy) never holds the rows back.
                break
            case let outcome?:
                // Down or refusing the credential: the rows would get the same answer.
                try await handle(outcome, [], last: nil, credential: config.credential)
                return
            }
            guard let sentID = cursor?.sentID else { return }
            // Read and encoded on the sink's idle-class thread: under load the data path has the core.
            let (outbox, limit, encoder) = (self.outbox, batchLimit, rows.encoder(deviceUUID: config.deviceUUID))
            let next = try await worker.runIfActive { () throws -> (body: String, rows: [EntryRows.Encoded])? in
                let fetched = try outbox.readRows(after: sentID, limit: limit)
                return fetched.isEmpty ? nil : EntryRows.batch(fetched, encoder, maxBytes: Self.maxBatchBytes)
            }
            guard let batch = next else {
                if current.state != .backingOff || current.nextAttemptAt.map({ $0 < Date() }) ?? true { set(.idle, nil) }
                await pause(0.5)
                return
            }
            guard let last = batch.rows.last else { return }
            set(.sending, nil)
            let outcome = await config.target.pushEntries(batch.body)
            try await handle(outcome, batch.rows, last: last, credential: config.credential)
        } catch {
            // The store: busy, full or gone for a moment. The rows are still there.
            fail("the capture store: \(StoreHealth.describe(error))", state: .backingOff, delay: backoff.next())
            await pause(current.nextAttemptAt.map { $0.timeIntervalSinceNow } ?? 1)
        }
    }

    /// What an answer leads to. `last` is the batch's last row (nil: the
    /// answer was to a `device_status` report).
    private func handle(_ outcome: PushOutcome, _ sent: [EntryRows.Encoded], last: EntryRows.Encoded?, credential: String) async throws {
        switch outcome {
        case .accepted:
            guard let last else { return }
            try await outbox.advance(through: last.id, sent: sent.count)
            moveCursor(to: last.id)
            current.sentRows += sent.count
            current.lastPushAt = Date()
            current.nextAttemptAt = nil
            sentTimes.append((Date(), sent.count))
            if backoff.failures > 0 {
                logger.notice("the cloud answers again; sending the backlog", metadata: ["TARGET": "\(current.target ?? "")"])
            }
            backoff.reset()
            if Date() > growAfter { batchLimit = min(Self.maxBatchRows, batchLimit * 2) }
        case let .rowRejected(why) where sent.count > 1:
            batchLimit = max(1, sent.count / 2)
            logger.warning(
                "the server refused a row of the batch; halving it to find which", metadata: ["ROWS": "\(sent.count)", "ERROR": "\(why)"])
        case let .rowRejected(why):
            guard let last else { return }
            try await outbox.advance(through: last.id, sent: 0, rejected: 1)
            moveCursor(to: last.id)
            logger.error(
                "the server refuses a row; it stays in the local store only",
                metadata: ["REQUEST_ID": "\(last.requestID)", "ERROR": "\(why)"])
        case .tooLarge where last == nil:
            fail("HTTP 413 to a device_status report", state: .backingOff, delay: backoff.next())
            await pause(current.nextAttemptAt.map { $0.timeIntervalSinceNow } ?? 1)
        case .tooLarge where sent.count > 1:
            batchLimit = max(1, sent.count / 2)
            growAfter = Date().addingTimeInterval(600)
            logger.warning(
                "the server took the batch as too large (413); halving it", metadata: ["ROWS": "\(sent.count)", "NOW": "\(batchLimit)"])
        case .tooLarge:
            // One row larger than the server takes: it cannot go; the rest can.
            guard let last else { return }
            try await outbox.advance(through: last.id, sent: 0, rejected: 1)
            moveCursor(to: last.id)
            logger.error(
                "the server refuses a single row as too large (413); it stays in the local store only",
                metadata: ["REQUEST_ID": "\(last.requestID)"])
        case let .unauthorized(why):
            refusedCredential = credential
            current.lastError = why
            current.lastErrorAt = Date()
            set(.rePairRequired, why)
            logger.error(
                "the server refuses the credential; re-pair required (busymate pair), nothing is lost meanwhile",
                metadata: ["SINK": "\(source.name)", "ERROR": "\(why)"])
        case let .refused(why):
            fail(why, state: .refused, delay: max(60, backoff.next()))
            await pause(current.nextAttemptAt.map { $0.timeIntervalSinceNow } ?? 60)
        case let .retry(why, after):
            fail(why, state: .backingOff, delay: backoff.next(at: after))
            await pause(current.nextAttemptAt.map { $0.timeIntervalSinceNow } ?? 1)
        }
    }

    /// Not `cursor?.sentID = max(cursor?.sentID …)`: the optional chain's
    /// write access would span the read of the same property.
    private func moveCursor(to id: Int64) {
        guard var moved = cursor else { return }
        moved.sentID = max(moved.sentID, id)
        cursor = moved
    }

    private func fail(_ why: String, state: CloudSinkStatus.State, delay: Double) {
        let first = backoff.failures <= 1 || current.lastError != why
        current.lastError = why
        current.lastErrorAt = Date()
        current.nextAttemptAt = Date().addingTimeInterval(delay)
        set(state, why)
        // Once per kind of failure, not once per attempt.
        if first {
            logger.warning(
                "cannot send to the cloud; the rows wait in the store",
                metadata: [
                    "ERROR": "\(why)", "RETRY_IN": "\(String(format: "%.1f", delay)) s", "TARGET": "\(current.target ?? "")",
                ])
        }
    }

    private func set(_ state: CloudSinkStatus.State, _ detail: String?) {
        current.state = state
        current.detail = detail
    }

    private var vpnState: String { mode == "transparent" ? "on" : "off" }

    /// The seed's `device_status` events: start, a mode change, once each
    /// (nil: nothing to report). A failed report is made again with the
    /// next attempt, which the answer paces.
    private func reportStatus(_ config: SinkConfig) async -> PushOutcome? {
        let key = "\(config.identity)/\(vpnState)"
        guard reported != key else { return nil }
        let outcome = await config.target.upsertStatus(deviceUUID: config.deviceUUID, online: true, vpnState: vpnState)
        if outcome == .accepted { reported = key }
        return outcome
    }

    /// Sleeps up to `seconds`, less when woken (a token change, a stop).
    private func pause(_ seconds: Double) async {
        let woken = wakes
        let until = ContinuousClock.now + .milliseconds(Int(max(0, seconds) * 1000))
        while ContinuousClock.now < until, wakes == woken, !stopping, !Task.isCancelled {
            let left = until - ContinuousClock.now
            try? await Task.sleep(for: min(left, .milliseconds(250)))
        }
    }

}

/// Row encoders for one device uuid.
struct EntryRowsFactory: Sendable {
    let bodies: BodyStore
    func encoder(deviceUUID: String) -> EntryRows { EntryRows(deviceUUID: deviceUUID, bodies: bodies) }
}
