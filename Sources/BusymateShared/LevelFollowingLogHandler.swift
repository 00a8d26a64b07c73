import Logging

/// The plumbing both of Busymate's log handlers share: metadata, and a level
/// that follows `LogControl.level` (so `log_level` applies live) unless a
/// logger sets its own.
public protocol LevelFollowingLogHandler: LogHandler {
    var overrideLevel: Logger.Level? { get set }
}

extension LevelFollowingLogHandler {
    public var logLevel: Logger.Level {
        get { overrideLevel ?? LogControl.level }
        set { overrideLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
