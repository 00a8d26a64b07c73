import BusymateShared
import Logging
import Synchronization

/// The settings the onboarding pages answer from: the settings in force,
/// read at start and again when `settings.json` changes, not on every
/// request (devices fetch the PAC often, and the file may be large). A
/// save that does not parse leaves the last good settings in force, as in
/// the tunnel.
public final class OnboardingSettings: Sendable {
    private let paths: GroupPaths
    private let applied: Mutex<AppliedSettings>
    // The tunnel and the supervisor report a bad file; not said again here.
    private let quiet = {
        var logger = Logger(label: "busymate.web.settings")
        logger.logLevel = .critical
        return logger
    }()

    public init(paths: GroupPaths, snapshot: SettingsSnapshot) {
        self.paths = paths
        applied = Mutex(AppliedSettings(snapshot))
    }

    /// Read on the global executor, off the caller's.
    public static func load(_ paths: GroupPaths) async -> OnboardingSettings {
        OnboardingSettings(paths: paths, snapshot: await AppliedSettings.read(paths.settings))
    }

    var current: AppSettings { applied.withLock { $0.settings } }

    public func reload() async {
        let ticket = applied.withLock { $0.beginRead() }
        let snapshot = await AppliedSettings.read(paths.settings)
        applied.withLock { applied in
            guard applied.take(ticket) else { return }
            _ = applied.apply(snapshot, logger: quiet)
        }
    }

    /// A file that could not be read at all is tried again (a `chmod` that
    /// fixes it makes no event).
    public func retryIfUnread() async {
        if applied.withLock({ $0.readFailed }) { await reload() }
    }
}
