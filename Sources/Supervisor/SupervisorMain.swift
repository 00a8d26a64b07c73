import BusymateShared
import Foundation
import Logging
import ServiceLifecycle

/// `busymate-app`'s whole program, reachable from tests.
public enum SupervisorMain {
    public static func run(
        groupOverride: String?, tunnelOverride: String?, tunnelIdentity: TunnelIdentity = .default,
        webUser: String = TunnelIdentity.defaultWebUser, restartBackoffMax: Double = 30,
        privilegedPorts: PrivilegedPorts = PrivilegedPorts(), attachDeadline: Double = 30
    ) async -> Int32 {
        // Another uid than the tunnel's (it cannot signal it, nor read its
        // secrets), in the tunnel's group (the store, settings, web-token).
        let webIdentity = TunnelIdentity(user: webUser, group: tunnelIdentity.group)
        let paths = GroupPaths.resolve(explicit: groupOverride)
        let first = SettingsFile.read(paths.settings)
        LogControl.bootstrap(identifier: "busymate-app", level: first.settings?.logLevel ?? .info)
        let logger = Logger(label: "busymate.supervisor")
        signal(SIGPIPE, SIG_IGN)
        umask(0o007)
        do {
            try GroupDirectory.prepare(paths, webUser: webIdentity.user, logger: logger)
        } catch {
            logger.critical("cannot prepare the group directory", metadata: ["PATH": "\(paths.root.path)", "ERROR": "\(error)"])
            Systemd.status("cannot start: cannot prepare the group directory \(paths.root.path): \(error)")
            return 1
        }
        if let problem = GroupDirectory.reachabilityProblem(paths, identity: tunnelIdentity) {
            logger.critical(
                "the group directory is out of the tunnel's reach; refusing to start",
                metadata: ["PATH": "\(paths.root.path)", "ERROR": "\(problem)"])
            Systemd.status("cannot start: \(problem)")
            return 78  // EX_CONFIG: systemd's Restart=on-failure retries, which will not help until it is fixed
        }
        logger.info("starting", metadata: ["GROUP": "\(paths.root.path)"])
        let snapshot = SettingsFile.read(paths.settings)
        AppliedSettings.warnAboutRootOnlyKeys(snapshot.unknownKeys, logger: Logger(label: "busymate.settings"))
        if let error = snapshot.error {
            Logger(label: "busymate.settings").error(
                "settings.json is invalid; running with defaults until it is fixed", metadata: ["ERROR": "\(error)"])
        }
        let (ca, generated) = CertificateAuthorityBootstrap.ensure(paths, logger: Logger(label: "busymate.cert"))
        SecretFiles.protect(paths, reader: tunnelIdentity.user, logger: Logger(label: "busymate.cert"))

        let tunnelPath =
            tunnelOverride ?? ProcessInfo.processInfo.environment["BUSYMATE_TUNNEL"]
            ?? URL(
                fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
            )
            .deletingLastPathComponent().appendingPathComponent("busymate-tunnel").path
        let webPath =
            ProcessInfo.processInfo.environment["BUSYMATE_WEB"]
            ?? URL(fileURLWithPath: tunnelPath).deletingLastPathComponent().appendingPathComponent("busymate-web").path
        do {
            try WebToken.ensure(paths, group: PrivilegeDrop.lookupGroup("busymate"))
        } catch {
            Logger(label: "busymate.web").error("cannot write the web token; the web page will not start", metadata: ["ERROR": "\(error)"])
        }
        let notifier = try? Notifier(paths: paths, role: "app")
        if generated { notifier?.post(.caDidChange) }
        let control: ControlServer
        do {
            control = try ControlServer(paths: paths)
        } catch {
            logger.critical("cannot bind the control socket", metadata: ["ERROR": "\(error)"])
            return 1
        }
        let service = SupervisorService(
            paths: paths, launcher: TunnelLauncher(executable: tunnelPath, paths: paths, identity: tunnelIdentity),
            notifier: notifier, snapshot: snapshot, ca: ca, maxBackoff: restartBackoffMax, attachDeadline: attachDeadline)
        let web = WebKeeper(
            paths: paths, launcher: TunnelLauncher(executable: webPath, paths: paths, identity: webIdentity),
            address: (snapshot.settings ?? AppSettings()).webListen, onboarding: snapshot.settings?.onboardingListen,
            maxBackoff: restartBackoffMax
        ) { summary in
            await service.setWebSummary(summary)
        }
        await service.allow(privilegedPorts)
        await web.allow(privilegedPorts)
        let reload: @Sendable () async -> Void = {
            await service.reloadSettings()
            await web.apply(await service.settings)
        }
        var jobs = [
            DaemonJob("control socket") {
                for await peer in control.peers().cancelOnGracefulShutdown() {
                    Task { await serve(peer, service: service, web: web) }
                }
            }
        ]
        if let watcher = DaemonJob.groupWatcher(
            paths,
            { file in
                switch file {
                case .settings: await reload()
                case .caPEM, .caKey: await service.reloadCA()
                case .deviceToken, .teamDatabase: await service.protectSecrets()
                case .controlSocket: break
                }
            })
        {
            jobs.append(watcher)
        }
        if let notifier {
            jobs.append(
                .notifications(notifier) { note in
                    if note.name == .settingsDidChange { await reload() }
                    if note.name == .caDidChange { await service.reloadCA() }
                })
        }
        jobs.append(
            DaemonJob("health tick") {
                let interval = Systemd.watchdogInterval.map { min(Duration.seconds(1), $0 / 2) } ?? .seconds(1)
                while !Task.isShuttingDownGracefully && !Task.isCancelled {
                    await service.tick()
                    await web.tick()
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
                }
            })
        // Last, so shut down first, while the control socket still serves the tunnel's link.
        jobs.append(
            DaemonJob("supervisor", endsDaemon: true) {
                await service.loadPairing()
                await service.start()
                await web.start()
                try? await gracefulShutdown()
                logger.info("stopping")
                let handingOver = await service.beginStop()
                async let webStopped: Void = web.shutdown(leaveRunning: handingOver)
                await service.shutdown()
                await webStopped
            })
        await DaemonJob.runGroup(jobs, logger: logger) {
            Systemd.reloading()
            logger.info("reloading (SIGHUP)")
            await reload()
            await service.reloadCA()
            notifier?.post(.settingsDidChange)
            Systemd.ready(status: await service.pill())
        }
        control.close()
        notifier?.close()
        unlink(paths.controlSocket.path)
        return 0
    }

    /// One control connection: a tunnel's link (it says hello first) or a
    /// CLI request answered with one reply.
    static func serve(_ peer: ControlServer.Peer, service: SupervisorService, web: WebKeeper) async {
        let pid = peer.credentials.pid
        var isLink = false
        for await incoming in peer.connection.messages(name: "busymate-peer-\(pid)") {
            let message = incoming.message
            switch message.kind {
            case .hello where message.role == "web":
                isLink = true
                await web.attach(peer, hello: message, descriptors: incoming.descriptors)
            case .hello:
                isLink = true
                await service.attach(peer, hello: message, descriptors: incoming.descriptors)
            case .state, .pong:
                if await web.owns(pid) {
                    await web.linkMessage(message, from: pid)
                } else {
                    await service.linkMessage(message, from: pid)
                }
            case .status:
                var report = await service.report()
                report.web = await web.report()
                report.web?.onboarding?.warning = await service.settings.onboardingWarning
                try? peer.connection.send(ControlMessage(.reply, ok: true, report: report))
            case .webStart:
                try? peer.connection.send(await web.startCommand())
            case .webStop:
                try? peer.connection.send(await web.stop())
            case .webRestart:
                try? peer.connection.send(await web.restart())
            case .tunnelRestart:
                try? peer.connection.send(await service.tunnelRestart())
            case .tunnelStop:
                try? peer.connection.send(await service.tunnelStop())
            case .tunnelStart:
                try? peer.connection.send(await service.tunnelStart())
            case .handover:
                // Leaving processes behind a stop is root's decision.
                guard peer.credentials.uid == 0 || peer.credentials.uid == geteuid() else {
                    try? peer.connection.send(.reply(ok: false, "permission denied: a handover is for root (the package's upgrade)"))
                    continue
                }
                try? peer.connection.send(await service.handoverCommand(message))
            case .pair, .unpair, .teamDatabase:
                // The account removed this device (Realtime's `unpair`): the
                // tunnel holding the token may give it up, never take one.
                if message.kind == .unpair, isLink, await service.isCurrentTunnel(pid) {
                    // Not on this loop: the link's pongs go on being read while the server is told.
                    Task {
                        let reply = await service.unpair()
                        Logger(label: "busymate.cloud").notice(
                            "unpaired at the account's request", metadata: ["RESULT": "\(reply.message ?? "")"])
                    }
                    continue
                }
                // Where captures go is root's decision, not the group's.
                guard peer.credentials.uid == 0 || peer.credentials.uid == geteuid() else {
                    try? peer.connection.send(.reply(ok: false, "permission denied: pairing, unpairing and the team database are for root"))
                    continue
                }
                if message.kind == .teamDatabase {
                    try? peer.connection.send(await service.pairing.setTeamDatabase(message.url))
                } else if message.kind == .unpair {
                    try? peer.connection.send(await service.unpair())
                } else if let request = message.pairing {
                    try? peer.connection.send(await service.pair(request))
                } else {
                    try? peer.connection.send(.reply(ok: false, "pair needs a code"))
                }
            default:
                incoming.descriptors.forEach { close($0) }
                try? peer.connection.send(.reply(ok: false, "unexpected message \(message.kind.rawValue)"))
            }
        }
        if isLink {
            await service.linkEnded(pid: pid)
            await web.linkEnded(pid: pid)
        }
        peer.connection.socket.close()
    }
}
