import BusymateShared
import CaptureStore
import Cloud
import Foundation
import Logging
import NIOCore
import NIOPosix
import ProxyEngine
import ServiceLifecycle

/// `busymate-tunnel`'s whole program, reachable from tests.
public enum TunnelMain {

    /// What `prepare` leaves for `run`: listeners bound or inherited, root
    /// already given up.
    public struct Prepared: Sendable {
        let paths: GroupPaths
        let snapshot: SettingsSnapshot
        let sockets: [ListenSocket]
        let privileges: String
        let supervised: Bool
    }

    /// The synchronous start: must run on the main thread before anything
    /// else, because glibc applies set*id to live threads only, and Swift's
    /// main thread leaves (still as root, as `/proc` would show) once async
    /// code runs.
    public static func prepare(groupOverride: String?, identity: TunnelIdentity) -> Result<Prepared, ExitCode> {
        let paths = GroupPaths.resolve(explicit: groupOverride)
        let snapshot = SettingsFile.read(paths.settings)
        let settings = snapshot.settings ?? AppSettings()
        LogControl.bootstrap(identifier: "busymate-tunnel", level: settings.logLevel)
        let logger = Logger(label: "busymate.tunnel")
        signal(SIGPIPE, SIG_IGN)
        raiseDescriptorLimit(logger)

        // Bind or inherit the listeners while still root, then drop root
        // before a single byte is read from the network.
        var sockets = InheritedListeners.take()
        let supervised = ProcessInfo.processInfo.environment["BUSYMATE_SUPERVISED"] == "1"
        if sockets.isEmpty && !supervised {
            logger.notice("no listeners handed over: running standalone and binding proxy.listen itself")
            for address in settings.listen {
                do {
                    sockets.append(try ListenSocket.bind(address))
                } catch {
                    logger.error("cannot listen", metadata: ["LISTENER": "\(address)", "ERROR": "\(error)"])
                }
            }
        }

        let privileges: String
        do {
            switch try PrivilegeDrop.drop(user: identity.user, group: identity.group) {
            case let .dropped(user, uid, gid):
                privileges = "dropped to \(user):\(identity.group) (\(uid):\(gid))"
                logger.info("privileges dropped", metadata: ["UID": "\(uid)", "GID": "\(gid)"])
            case let .unprivileged(uid):
                privileges = "unprivileged (not started as root)"
                logger.notice("started without root: nothing to drop, running as uid \(uid)")
            }
        } catch {
            logger.critical("cannot drop privileges; refusing to serve", metadata: ["ERROR": "\(error)"])
            return .failure(ExitCode(TunnelExitStatus.cannotStart))
        }
        if let error = snapshot.error {
            Logger(label: "busymate.settings").error(
                "settings.json is invalid; running with defaults until it is fixed", metadata: ["ERROR": "\(error)"])
        }
        return .success(Prepared(paths: paths, snapshot: snapshot, sockets: sockets, privileges: privileges, supervised: supervised))
    }

    /// Every connection costs one or two descriptors: use the whole hard
    /// limit (systemd's default soft limit is 1024).
    static func raiseDescriptorLimit(_ logger: Logger) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        let soft = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            logger.debug("raised the descriptor limit", metadata: ["FROM": "\(soft)", "TO": "\(limit.rlim_max)"])
        }
    }

    public struct ExitCode: Error, Sendable {
        public let code: Int32
        init(_ code: Int32) { self.code = code }
    }

    public static func run(_ prepared: Prepared) async -> Int32 {
        let paths = prepared.paths
        let logger = Logger(label: "busymate.tunnel")
        let group = MultiThreadedEventLoopGroup(numberOfThreads: ProcessProbe.usableCPUs)
        let notifier: Notifier?
        do {
            notifier = try Notifier(paths: paths, role: "tunnel")
        } catch {
            Logger(label: "busymate.ipc").error(
                "cannot bind the notification socket; notifications are off", metadata: ["ERROR": "\(error)"])
            notifier = nil
        }
        let store: StoreHandle?
        var storeError: String?
        do {
            let (database, aside) = try CaptureDatabase.openOrReplaceCorrupt(paths)
            if let aside {
                Logger(label: "busymate.db").critical(
                    "the capture store was corrupt; moved it aside (kept, not deleted) and started a new one",
                    metadata: ["MOVED_TO": "\(aside.path)"])
            }
            store = StoreHandle(database)
        } catch {
            storeError = "cannot open \(paths.captureDatabase.path): \(StoreHealth.describe(error)); proxying without capture"
            Logger(label: "busymate.db").critical(
                "cannot open the capture store; proxying without capture", metadata: ["ERROR": "\(StoreHealth.describe(error))"])
            store = nil
        }
        let capture = store.map { CaptureWriter(store: $0, notifier: notifier) }
        let breakpoints = BreakpointController(store: store, records: capture, notifier: notifier, groupPath: paths.root.path)
        breakpoints.abandonOrphans()
        breakpoints.apply(prepared.snapshot.settings ?? AppSettings())
        let interception = Interception()
        interception.apply(prepared.snapshot.settings ?? AppSettings())
        interception.reloadCA(paths)
        if let capture {
            interception.setPinned(capture.pinnedHosts())
            capture.apply(prepared.snapshot.settings ?? AppSettings())
        }
        // Read here and by the status tick, off the event loops: admission and the loop guard read it on accept.
        LocalAddresses.shared.refresh()
        let server = ProxyServer(group: group, interception: interception, capture: capture, breakpoints: breakpoints)
        let sender = store.map { WebSocketSender(store: $0, registry: server.sockets) }
        server.rules.apply(prepared.snapshot.settings ?? AppSettings())
        server.timeouts.apply(prepared.snapshot.settings ?? AppSettings())
        let dns = DNSForwarder(group: group, capture: capture, devices: server.devices, names: server.dnsNames)
        server.devices.apply(prepared.snapshot.settings ?? AppSettings())
        dns.apply(prepared.snapshot.settings ?? AppSettings())
        // The store is the cloud sink's outbox: no store, nothing to send from.
        // Another tunnel of this group alive at our stop: a replacement, not the device going offline.
        let replaced: @Sendable () -> Bool = {
            ProcessProbe.find(named: "busymate-tunnel", servingGroup: paths.root.path).map { !ProcessProbe.isZombieOrGone($0) } ?? false
        }
        let sinks =
            store.map { store in
                [
                    CloudSink(.postgrest(token: paths.deviceToken), store: store, paths: paths, isReplaced: replaced),
                    CloudSink(.postgres(config: paths.teamDatabase), store: store, paths: paths, isReplaced: replaced),
                ]
            } ?? []
        for sink in sinks { await sink.setMode((prepared.snapshot.settings ?? AppSettings()).mode.rawValue) }
        // Set once the runtime exists: the commands reach the supervisor through its link.
        let runtimeBox = RuntimeBox()
        let realtime = store.map { store in
            RealtimeLink(
                token: paths.deviceToken, store: store,
                commands: CloudCommands(
                    paths: paths, store: store, breakpoints: breakpoints, notifier: notifier,
                    tellSupervisor: { message in await runtimeBox.runtime?.tellSupervisor(message) ?? false }))
        }
        await realtime?.setMode((prepared.snapshot.settings ?? AppSettings()).mode.rawValue)
        let runtime = TunnelRuntime(
            paths: paths, server: server, dns: dns, capture: capture, notifier: notifier, privileges: prepared.privileges,
            snapshot: prepared.snapshot,
            storeError: storeError, cloud: sinks, realtime: realtime)
        await runtimeBox.set(runtime)
        await runtime.hold(prepared.sockets)
        if prepared.supervised {
            // Accepting waits for the supervisor's `serve`.
            await runtime.attachIfNeeded()
        } else {
            await runtime.startServing()
        }

        // First, so shut down last: it ends once `finish()` has let the last batch in.
        var jobs: [DaemonJob] = []
        if let capture {
            jobs.append(
                DaemonJob("capture writer") {
                    await capture.run()
                    // `finish()` (from the drain) ends run() before the group asks
                    // this job to stop: ending now would read as a failure.
                    try? await gracefulShutdown()
                })
        }
        if let watcher = DaemonJob.groupWatcher(
            paths,
            { file in
                switch file {
                case .settings:
                    await runtime.reloadSettings()
                    // pin_ttl may have changed: the pins' ends follow it.
                    if let capture {
                        let since = Date()
                        interception.setPinned(capture.pinnedHosts(), readSince: since)
                    }
                case .controlSocket: await runtime.attachIfNeeded()
                case .caPEM, .caKey: await runtime.reloadCA()
                case .deviceToken:
                    await sinks.first?.reloadToken()
                    await realtime?.reloadToken()
                case .teamDatabase: await sinks.last?.reloadToken()
                }
            })
        {
            jobs.append(watcher)
        }
        for sink in sinks {
            jobs.append(
                DaemonJob("cloud sink") {
                    async let sending: Void = sink.run()
                    try? await gracefulShutdown()
                    await sink.stop()
                    await sending
                    await sink.shutdown()
                })
        }
        if let realtime {
            jobs.append(
                DaemonJob("realtime") {
                    async let linked: Void = realtime.run()
                    try? await gracefulShutdown()
                    await realtime.stop()
                    await linked
                    await realtime.shutdown()
                })
        }
        if let notifier {
            jobs.append(
                .notifications(notifier) { note in
                    switch note.name {
                    case .settingsDidChange:
                        await runtime.reloadSettings()
                        // `busymate pinned remove` posts this too.
                        if let capture {
                            let since = Date()
                            interception.setPinned(capture.pinnedHosts(), readSince: since)
                        }
                    case .caDidChange: await runtime.reloadCA()
                    case .breakpointContinue: try? await NIOThreadPool.singleton.runIfActive { breakpoints.carryOutRequests() }
                    case .webSocketSend: await sender?.carryOut()
                    default: break
                    }
                })
        }
        if let open = capture?.open {
            jobs.append(
                DaemonJob("open exchanges") {
                    // At most four writes a second, and only when something changed: the
                    // cost does not grow with the request rate.
                    var seen: Int?
                    while !Task.isShuttingDownGracefully && !Task.isCancelled {
                        try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(250)) }
                        let (changes, file) = open.snapshot(since: seen)
                        guard let file else { continue }
                        do {
                            try AtomicFile.write(file.encoded(), to: paths.openExchanges, mode: 0o640, sync: false)
                            seen = changes
                            notifier?.post(.openExchangesChanged)
                        } catch {
                            Logger(label: "busymate.capture").warning("cannot write open-exchanges.json", metadata: ["ERROR": "\(error)"])
                            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(5)) }
                        }
                    }
                    // Only our own: a new tunnel may have written it while this one drained.
                    if OpenExchangesFile.read(paths)?.pid == getpid() { unlink(paths.openExchanges.path) }
                })
        }
        jobs.append(
            DaemonJob("status tick") {
                while !Task.isShuttingDownGracefully && !Task.isCancelled {
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(500)) }
                    await runtime.attachIfNeeded()
                    await runtime.retrySettingsIfUnread()
                    await runtime.sweepPresence()
                    await runtime.renewGrants()
                    await runtime.publish()
                    // In case a breakpointContinue or a webSocketSend was lost (a full queue).
                    try? await NIOThreadPool.singleton.runIfActive { breakpoints.carryOutRequests() }
                    await sender?.carryOut()
                    // A new or lost interface address: accepts read the list, never getifaddrs.
                    try? await NIOThreadPool.singleton.runIfActive { LocalAddresses.shared.refreshIfOld() }
                }
            })
        // Last, so shut down first: the drain runs while the jobs above still serve.
        jobs.append(
            DaemonJob("tunnel", endsDaemon: true) {
                try? await gracefulShutdown()
                logger.info("stopping")
                await runtime.drain()
                breakpoints.abandonAll()
                capture?.finish()
            })
        await DaemonJob.runGroup(jobs, logger: logger) { await runtime.reloadSettings() }
        await capture?.flush()
        await capture?.checkpoint()
        await runtime.finish()
        // The process ends here; the event loops go with it.
        logger.info("stopped")
        return 0
    }
}
