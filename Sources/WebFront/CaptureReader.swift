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
    /// The handle and the inode it was opened on.
    private let database = Mutex<(CaptureDatabase, UInt64)?>(nil)

    public init(paths: GroupPaths) { self.paths = paths }

    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    func open() throws -> CaptureDatabase {
        try database.withLock { current in
            var st = stat()
            guard stat(paths.captureDatabase.path, &st) == 0 else {
                current = nil
                throw Unavailable(description: "no capture store yet (the tunnel creates it when it starts)")
            }
            // A store the tunnel moved aside (corrupt) and replaced is a new file.
            if let (handle, inode) = current, inode == UInt64(st.st_ino) { return handle }
            do {
                let opened = try CaptureDatabase(paths: paths, readOnly: true, owner: false)
                current = (opened, UInt64(st.st_ino))
                return opened
            } catch {
                throw Unavailable(description: "cannot open the capture store: \(StoreHealth.describe(error))")
            }
        }
    }

    /// Forgets the handle, so the next use opens the store again.
    func reset() {
        database.withLock { $0 = nil }
    }

    /// Runs `body` with the repositories on NIO's thread pool: SQLite
    /// blocks, and the concurrency pool has one thread per core.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Repositories) throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive { [self] in
            let db = try open()
            do {
                return try body(Repositories(database: db))
            } catch let error where StoreHealth.isCorruption(error) {
                reset()
                throw error
            }
        }
    }

    public struct Repositories: Sendable {
        public let traffic: TrafficRepository
        public let breakpoints: BreakpointRepository
        public let pinned: PinnedDomainRepository
        public let bodies: BodyStore

        init(database: CaptureDatabase) {
            traffic = TrafficRepository(database: database)
            breakpoints = BreakpointRepository(database: database)
            pinned = PinnedDomainRepository(database: database)
            bodies = BodyStore(paths: database.paths)
        }
    }
}
