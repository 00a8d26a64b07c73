import BusymateShared
import CaptureStore
import Foundation
import NIOPosix
import Synchronization

/// The web front's read-only handle on the capture store. The tunnel
/// creates the store, so it may not be there yet at start: opened on first
/// use, and opened again after a failure (the tunnel may have moved a
/// corrupt one aside).
public final class CaptureReader: Sendable {
    public let paths: GroupPaths
    /// The handles (read-only, and for the few writes: breakpoint
    /// requests) and the inode each was opened on.
    private let database = Mutex<(CaptureDatabase, UInt64)?>(nil)
    private let writable = Mutex<(CaptureDatabase, UInt64)?>(nil)

    public init(paths: GroupPaths) { self.paths = paths }

    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    func open(readOnly: Bool = true) throws -> CaptureDatabase {
        readOnly ? try database.withLock { try open(&$0, readOnly: true) } : try writable.withLock { try open(&$0, readOnly: false) }
    }

    private func open(_ current: inout (CaptureDatabase, UInt64)?, readOnly: Bool) throws -> CaptureDatabase {
        var st = stat()
        guard stat(paths.captureDatabase.path, &st) == 0 else {
            current = nil
            throw Unavailable(description: "no capture store yet (the tunnel creates it when it starts)")
        }
        // A store the tunnel moved aside (corrupt) and replaced is a new file.
        if let (handle, inode) = current, inode == UInt64(st.st_ino) { return handle }
        do {
            let opened = try CaptureDatabase(paths: paths, readOnly: readOnly, owner: false)
            current = (opened, UInt64(st.st_ino))
            return opened
        } catch {
            throw Unavailable(description: "cannot open the capture store: \(StoreHealth.describe(error))")
        }
    }

    /// Forgets the handle, so the next use opens the store again.
    func reset() {
        database.withLock { $0 = nil }
        writable.withLock { $0 = nil }
    }

    /// Runs `body` with the repositories on NIO's thread pool: SQLite
    /// blocks, and the concurrency pool has one thread per core. A `.slow`
    /// read (`QueryLane`) runs on threads of its own on a handle of its own,
    /// and is interrupted when its task is cancelled (the client left).
    public func read<T: Sendable>(
        writing: Bool = false, lane: QueryLane = .cheap,
        _ body: @escaping @Sendable (Repositories) throws -> T
    ) async throws -> T {
        if lane == .slow && !writing { return try await slowRead(body) }
        return try await NIOThreadPool.singleton.runIfActive { [self] in
            let db = try open(readOnly: !writing)
            do {
                return try body(Repositories(database: db))
            } catch let error where StoreHealth.isCorruption(error) {
                reset()
                throw error
            }
        }
    }

    /// Slow reads at once; more wait for a thread (a cancelled one leaves
    /// the queue). Their own threads: cheap reads never wait behind them.
    static let slowThreads = 2
    private static let slowPool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: slowThreads)
        pool.start()
        return pool
    }()

    private func slowRead<T: Sendable>(_ body: @escaping @Sendable (Repositories) throws -> T) async throws -> T {
        let running = RunningQuery()
        return try await withTaskCancellationHandler {
            try await Self.slowPool.runIfActive { [self] in
                // A handle of its own: interrupting it stops this query alone.
                var handle: (CaptureDatabase, UInt64)?
                let db = try open(&handle, readOnly: true)
                try running.start(db)
                defer { running.finish() }
                do {
                    return try body(Repositories(database: db))
                } catch {
                    // Interrupted: SQLite says so with an error of its own.
                    if running.isCancelled { throw CancellationError() }
                    throw error
                }
            }
        } onCancel: {
            running.cancel()
        }
    }

    public struct Repositories: Sendable {
        public let traffic: TrafficRepository
        public let breakpoints: BreakpointRepository
        public let pinned: PinnedDomainRepository
        public let bodies: BodyStore
        public let sockets: WebSocketRepository
        public let sends: WebSocketSendRepository

        init(database: CaptureDatabase) {
            sockets = WebSocketRepository(database: database)
            sends = WebSocketSendRepository(database: database)
            traffic = TrafficRepository(database: database)
            breakpoints = BreakpointRepository(database: database)
            pinned = PinnedDomainRepository(database: database)
            bodies = BodyStore(paths: database.paths)
        }
    }
}
