import Foundation
import Logging

/// The settings a process has in force, and how the last read went. Both
/// daemons reload through this, so both treat a save the same way: a valid
/// file is applied once (by its SHA-256), an invalid one leaves the last good
/// settings in force and is reported once per distinct content.
public struct AppliedSettings: Sendable {
    public private(set) var settings: AppSettings
    /// SHA-256 of the file content now in force; empty when running on defaults.
    public private(set) var sha256: String
    public private(set) var error: SettingsError?
    public private(set) var unknownKeys: [String]
    private var reportedErrorSHA: String?
    private var readsBegun = 0
    private var readsTaken = 0

    public enum Outcome: Sendable {
        case unchanged
        case applied(previous: AppSettings)
        case rejected
    }

    public init(_ snapshot: SettingsSnapshot) {
        settings = snapshot.settings ?? AppSettings()
        sha256 = snapshot.settings == nil ? "" : snapshot.sha256
        error = snapshot.error
        unknownKeys = snapshot.unknownKeys
    }

    /// The last read failed before parsing (the file unreadable, missing, a
    /// directory): a `chmod` that fixes it makes no inotify event worth
    /// watching (reads change atimes too), so the daemons try again now and
    /// then while this holds.
    public var readFailed: Bool { error.map { $0.position == nil } ?? false }

    /// Daemons read and parse off the actor that answers health checks (a
    /// large file must not stall them): a ticket before the read, and
    /// `take(_:)` after it drops a read that finished after a later one.
    public mutating func beginRead() -> Int {
        readsBegun += 1
        return readsBegun
    }

    public mutating func take(_ ticket: Int) -> Bool {
        guard ticket > readsTaken else { return false }
        readsTaken = ticket
        return true
    }

    /// `SettingsFile.read` on the global executor, off the caller's actor.
    @concurrent public static func read(_ url: URL) async -> SettingsSnapshot {
        SettingsFile.read(url)
    }

    /// `tunnel.user` and the like are no longer read from the group-writable
    /// file; say so rather than ignore them silently.
    public static func warnAboutRootOnlyKeys(_ keys: [String], logger: Logger) {
        for key in keys {
            if let reason = AppSettings.rootOnlyKeys[key] {
                logger.warning("settings.json's \(key) is ignored: \(reason)", metadata: ["KEY": "\(key)"])
            }
        }
    }

    public mutating func apply(_ snapshot: SettingsSnapshot, logger: Logger) -> Outcome {
        switch snapshot.result {
        case let .success(new):
            error = nil
            reportedErrorSHA = nil
            unknownKeys = snapshot.unknownKeys
            // inotify and a notification may both report one save.
            guard snapshot.sha256 != sha256 else { return .unchanged }
            let previous = settings
            settings = new
            sha256 = snapshot.sha256
            LogControl.level = new.logLevel
            Self.warnAboutRootOnlyKeys(snapshot.unknownKeys, logger: logger)
            if !snapshot.unknownKeys.isEmpty {
                logger.notice(
                    "settings.json has keys this version does not know; kept as they are",
                    metadata: ["KEYS": "\(snapshot.unknownKeys.joined(separator: ", "))"])
            }
            logger.info("settings applied", metadata: ["SHA256": "\(sha256)"])
            return .applied(previous: previous)
        case let .failure(failure):
            error = failure
            if reportedErrorSHA != snapshot.sha256 {
                reportedErrorSHA = snapshot.sha256
                logger.error("settings.json is invalid; keeping the last good settings", metadata: ["ERROR": "\(failure)"])
            }
            return .rejected
        }
    }
}
