import Logging
import ServiceLifecycle
import UnixSignals

/// One job of a daemon, run by swift-service-lifecycle's `ServiceGroup`:
/// `body` runs until the group shuts down gracefully (its loops end through
/// `cancelOnGracefulShutdown()`). The group shuts jobs down last first, so
/// the job listed last (the one that stops the children or drains) goes
/// while the others still serve. A job that ends by itself ends only
/// itself (a watcher that could not start), unless it `endsDaemon`.
public struct DaemonJob: Service, CustomStringConvertible {
    public let description: String
    private let body: @Sendable () async -> Void
    let endsDaemon: Bool

    public init(_ name: String, endsDaemon: Bool = false, _ body: @escaping @Sendable () async -> Void) {
        description = name
        self.endsDaemon = endsDaemon
        self.body = body
    }

    public func run() async { await body() }

    /// Runs `jobs` until SIGTERM or SIGINT, then shuts them down in reverse
    /// order; SIGHUP calls `reload` (systemd's `ExecReload`, `kill -HUP`).
    public static func runGroup(_ jobs: [DaemonJob], logger: Logger, reload: (@Sendable () async -> Void)? = nil) async {
        var all = jobs
        if let reload {
            all.insert(
                DaemonJob("reload on SIGHUP") {
                    for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() { await reload() }
                }, at: 0)
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: all.map {
                    ServiceGroupConfiguration.ServiceConfiguration(
                        service: $0,
                        successTerminationBehavior: $0.endsDaemon ? .gracefullyShutdownGroup : .ignore)
                },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            logger.error("a job failed", metadata: ["ERROR": "\(error)"])
        }
    }
}

extension DaemonJob {
    /// Watches the group directory: `changed` for each shared file written
    /// (or, for the CA files, removed), until shutdown. Nil when inotify
    /// cannot watch it (the daemon then learns of changes by notification).
    public static func groupWatcher(_ paths: GroupPaths, _ changed: @escaping @Sendable (GroupPaths.Watched) async -> Void) -> DaemonJob? {
        // A removed token mirror is an unpairing (the tunnel) or a mirror to write again (the supervisor).
        let removals: Set<String> = [
            GroupPaths.Watched.caPEM.rawValue, GroupPaths.Watched.caKey.rawValue,
            GroupPaths.Watched.deviceToken.rawValue, GroupPaths.Watched.teamDatabase.rawValue,
        ]
        guard let watcher = try? FileWatcher(directory: paths.root, removals: removals) else { return nil }
        return DaemonJob("group directory watcher") {
            for await name in watcher.changes().cancelOnGracefulShutdown() {
                if let file = GroupPaths.Watched(rawValue: name) { await changed(file) }
            }
            watcher.stop()
        }
    }

    /// `received` for each notification posted to the group, until shutdown.
    public static func notifications(_ notifier: Notifier, _ received: @escaping @Sendable (BusymateNotification) async -> Void)
        -> DaemonJob
    {
        DaemonJob("notifications") {
            for await note in notifier.notifications().cancelOnGracefulShutdown() { await received(note) }
        }
    }
}
