import BusymateShared
import Foundation
import GRDB
import Synchronization

/// What a store error means for a person: SQLite's codes turned into what
/// to say and what to do.
public enum StoreHealth {
    /// The file is damaged (`SQLITE_CORRUPT`) or not a database at all
    /// (`SQLITE_NOTADB`): no retry will help.
    public static func isCorruption(_ error: Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB
    }

    public static func isStoreError(_ error: Error) -> Bool { error is DatabaseError }

    /// A filter's regular expression stopped for running too long: the filter's fault, not the store's.
    public static func isFilterTimeout(_ error: Error) -> Bool { FilterPatternTimeout.isOurs((error as? DatabaseError)?.message) }

    /// What a person can do about it, for the CLI.
    public static func advice(_ error: Error) -> String {
        guard let error = error as? DatabaseError else { return "" }
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return
                ". The tunnel moves a corrupt store aside (kept) and starts a new one when it finds it damaged; `busymate tunnel restart` makes it look now"
        case .SQLITE_FULL:
            return ". Free some space, or lower capture.max_bytes"
        default:
            return ""
        }
    }

    /// One line for `status`, the log and the CLI.
    public static func describe(_ error: Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        // Never the statement: a filter's SQL is no business of the person who typed it.
        if FilterPatternTimeout.isOurs(error.message), let message = error.message { return message }
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return "the capture store is corrupt (\(error.message ?? "SQLite error \(error.resultCode.rawValue)"))"
        case .SQLITE_FULL:
            return "the disk is full (\(error.message ?? "database or disk is full"))"
        case .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_CANTOPEN:
            return "the capture store cannot be written (\(error.message ?? "SQLite error \(error.resultCode.rawValue)"))"
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return "the capture store is locked by another process (\(error.message ?? "busy"))"
        case .SQLITE_IOERR:
            return "the capture store cannot be written: I/O error (\(error.message ?? "disk I/O error"); a full disk?)"
        default:
            return "SQLite error \(error.resultCode.rawValue): \(error.message ?? "")"
        }
    }
}

extension CaptureDatabase {
    /// Moves a damaged store out of the way, never deleting it: the database
    /// files go to `corrupt-<time>/`, and every body file is hard-linked
    /// there too (the new store would sweep them as orphans). Returns that
    /// directory.
    public static func moveAside(_ paths: GroupPaths, now: Date = Date()) throws -> URL {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        var target = paths.root.appendingPathComponent("corrupt-\(formatter.string(from: now))")
        var n = 1
        while FileManager.default.fileExists(atPath: target.path) {
            n += 1
            target = paths.root.appendingPathComponent("corrupt-\(formatter.string(from: now))-\(n)")
        }
        let bodies = target.appendingPathComponent("bodies")
        try FileManager.default.createDirectory(at: bodies, withIntermediateDirectories: true)
        chmod(target.path, 0o2770)
        chmod(bodies.path, 0o2770)
        for suffix in ["", "-wal", "-shm"] {
            let from = paths.captureDatabase.path + suffix
            if rename(from, target.appendingPathComponent("capture.sqlite" + suffix).path) != 0 && errno != ENOENT {
                throw Refusal(description: "cannot move \(from) aside: \(String(cString: strerror(errno)))")
            }
        }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: paths.bodies.path)) ?? [] {
            _ = link(paths.bodies.appendingPathComponent(name).path, bodies.appendingPathComponent(name).path)
        }
        return target
    }

    /// The tunnel's open: a store that SQLite finds corrupt is moved aside
    /// (kept) and a new one started, with one clear log line from the caller.
    public static func openOrReplaceCorrupt(_ paths: GroupPaths) throws -> (database: CaptureDatabase, movedAside: URL?) {
        do {
            let database = try CaptureDatabase(paths: paths)
            // Reads the first page of each table: a header that is fine over
            // garbage pages shows here rather than at the first commit.
            try database.pool.read { db in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM (SELECT id FROM exchanges ORDER BY id DESC LIMIT 1)")
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM pinned_domains")
            }
            return (database, nil)
        } catch  where StoreHealth.isCorruption(error) {
            let aside = try moveAside(paths)
            return (try CaptureDatabase(paths: paths), aside)
        }
    }
}

/// The tunnel's store, which a damaged file can make it replace while it
/// runs: the writer and the breakpoints take their repositories from here
/// at each use, so both move to the new file together.
public final class StoreHandle: Sendable {
    private let current: Mutex<CaptureDatabase>

    public init(_ database: CaptureDatabase) { current = Mutex(database) }

    public var database: CaptureDatabase { current.withLock { $0 } }

    public func replace(with database: CaptureDatabase) { current.withLock { $0 = database } }
}
