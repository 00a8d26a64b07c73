import BusymateShared
import Foundation
import Logging

/// The app's role: owns the listening sockets and the CA, keeps one tunnel
/// running (restarting it with backoff, adopting one left by an earlier
/// supervisor), answers the CLI and reports to systemd.
public actor SupervisorService {
    struct Tunnel {
        var pid: Int32
        var startedAt = Date()
        var adopted = false
        var state = TunnelState.starting
        var link: LinkConnection?
        var lastPong = Date()
        /// `serve` was sent (a tunnel in standby holds its sockets unused).
        var serveSent = false
        /// When it was asked to drain.
        var drainRequestedAt: Date?
        /// It said hello on the control socket.
        var attached = false
        /// Killed for not attaching within `attachDeadline`.
        var attachTimedOut = false
    }

    enum Desired { case running, stopped }

    let paths: GroupPaths
    let launcher: TunnelLauncher
    let notifier: Notifier?
    let logger = Logger(label: "busymate.supervisor")
    let settingsLogger = Logger(label: "busymate.settings")
    let networkLogger = Logger(label: "busymate.supervisor")
    var firewall: FirewallState
    let startedAt = Date()

    var applied: AppliedSettings
    var settings: AppSettings { applied.settings }
    var listeners: [ListenSocket] = []
    var listenerErrors: [String: String] = [:]
    var current: Tunnel?
    var draining: [Int32: Tunnel] = [:]
    var desired = Desired.running
    var pendingRestart: Task<Void, Never>?
    var nextRestartAt: Date?
    var backoff: RestartBackoff
    var restarts = 0
    var lastExit: String?
    var notifiedReady = false
    var shuttingDown = false
    /// Until then a stop leaves the children running (`armHandover`).
    var handoverUntil: Date?
    /// This stop leaves the children (and the firewall table) to the next supervisor.
    var handingOver = false
    var ca: CertificateAuthorityBootstrap.Info
    var pingSeq = 0
    /// The web front's part of the STATUS= line (`WebKeeper.summary`).
    var webSummary: String?
    /// Ports below 1024 the supervisor's command line allows.
    var privilegedPorts = PrivilegedPorts()
    /// The pairing's private copy as last read (`SupervisorService+Cloud`).
    var paired: DeviceToken?
    /// A started tunnel that has not attached by then is hung: killed
    /// (`busymate-app --attach-deadline`).
    let attachDeadline: TimeInterval

    init(
        paths: GroupPaths, launcher: TunnelLauncher, notifier: Notifier?, snapshot: SettingsSnapshot,
        ca: CertificateAuthorityBootstrap.Info,
        maxBackoff: Double = 30, attachDeadline: TimeInterval = 30
    ) {
        backoff = RestartBackoff(max: maxBackoff)
        self.attachDeadline = attachDeadline
        self.paths = paths
        self.launcher = launcher
        self.notifier = notifier
        self.ca = ca
        applied = AppliedSettings(snapshot)
        firewall = FirewallState(table: Firewall.table(for: paths.root))
    }

    func allow(_ ports: PrivilegedPorts) { privilegedPorts = ports }

    // MARK: start-up

    /// Waits briefly for a tunnel an earlier supervisor left running to
    /// attach; starts a fresh one otherwise.
    func start() async {
        // Only a tunnel of this group: a pid can be reused by another's.
        if let status = TunnelStatus.read(paths.status), ProcessProbe.isTunnel(status.pid, servingGroup: paths.root.path) {
            logger.notice("a tunnel is already running; waiting for it to attach", metadata: ["TUNNEL_PID": "\(status.pid)"])
            for _ in 0..<30 {
                if current != nil { return }
                try? await Task.sleep(for: .milliseconds(100))
            }
            logger.warning(
                "the running tunnel did not attach; stopping it and starting a new one", metadata: ["TUNNEL_PID": "\(status.pid)"])
            kill(status.pid, SIGTERM)
        }
        bindListeners()
        spawnTunnel()
        // A table a crashed supervisor left goes (it comes back once the tunnel is ready).
        reconcileFirewall()
    }

    func bindListeners() {
        let have = Set(listeners.map(\.name))
        let wanted = settings.wantedListeners
        let want = Set(wanted.map(\.name))
        for socket in listeners where !want.contains(socket.name) {
            close(socket.descriptor)
            logger.info("closed a listener", metadata: ["LISTENER": "\(socket.name)"])
        }
        listeners.removeAll { !want.contains($0.name) }
        listenerErrors = listenerErrors.filter { want.contains($0.key) }
        for listener in wanted where !have.contains(listener.name) {
            do {
                try privilegedPorts.check(listener.address)
                let socket = try ListenSocket.bind(listener)
                listeners.append(socket)
                listenerErrors[listener.name] = nil
                logger.info("listening", metadata: ["LISTENER": "\(listener.name)", "BOUND": "\(socket.bound)"])
                if let warning = settings.exposureWarning(listener.address) {
                    logger.warning("\(warning)", metadata: ["LISTENER": "\(socket.bound)"])
                }
            } catch {
                listenerErrors[listener.name] = "\(error)"
                logger.error("cannot listen", metadata: ["LISTENER": "\(listener.name)", "ERROR": "\(error)"])
            }
        }
    }

    func spawnTunnel() {
        guard desired == .running, !shuttingDown else { return }
        do {
            let pid = try launcher.spawn(listeners: listeners) { [weak self] exit in
                Task { await self?.tunnelExited(exit) }
            }
            if let old = current { draining[old.pid] = old }
            current = Tunnel(pid: pid)
            logger.info("started the tunnel", metadata: ["TUNNEL_PID": "\(pid)"])
        } catch {
            lastExit = "cannot start: \(error)"
            logger.error("cannot start the tunnel", metadata: ["ERROR": "\(error)"])
            scheduleRestart()
        }
    }

    // MARK: the tunnel's life

    func tunnelExited(_ exit: TunnelLauncher.Exit) {
        if let old = draining.removeValue(forKey: exit.pid) {
            logger.info("a replaced tunnel finished", metadata: ["TUNNEL_PID": "\(old.pid)", "EXIT": "\(exit.description)"])
            handOver()
            return
        }
        guard let ended = current, ended.pid == exit.pid else { return }
        current = nil
        defer { reconcileFirewall() }
        let why = ended.attachTimedOut ? "did not attach within \(String(format: "%g", attachDeadline)) s (killed)" : exit.description
        lastExit = why
        // A replacement that never took over: the tunnel it was to replace
        // still serves (it was not asked to drain), so it stays the current
        // one. Otherwise status would say "crash loop" while it serves, and
        // the next restart would start a second tunnel beside it.
        if !ended.serveSent, !ended.adopted, !shuttingDown,
            let (pid, previous) = draining.first(where: {
                $0.value.drainRequestedAt == nil && ProcessProbe.isAlive($0.key) && !ProcessProbe.isZombieOrGone($0.key)
            })
        {
            draining[pid] = nil
            current = previous
            lastExit = "replacement \(exit.pid) \(why) before taking over"
            logger.error(
                "the new tunnel exited before taking over; the running one goes on serving",
                metadata: ["TUNNEL_PID": "\(pid)", "FAILED_PID": "\(exit.pid)", "EXIT": "\(why)"])
            return
        }
        notifier?.post(.tunnelStateChanged, payload: "exited")
        if shuttingDown || desired == .stopped {
            logger.info("the tunnel stopped", metadata: ["TUNNEL_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
            return
        }
        if exit.status == TunnelExitStatus.cannotStart {
            logger.error(
                "the tunnel cannot start (see its log); retrying with backoff",
                metadata: ["TUNNEL_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
        } else {
            logger.error(
                "the tunnel exited unexpectedly; restarting it", metadata: ["TUNNEL_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
        }
        scheduleRestart()
    }

    /// `RestartBackoff`, capped at `busymate-app --restart-backoff-max` (30 s).
    func scheduleRestart() {
        let delay = backoff.exited()
        nextRestartAt = Date().addingTimeInterval(delay)
        pendingRestart?.cancel()
        pendingRestart = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            guard !Task.isCancelled else { return }
            await self?.restartAfterBackoff()
        }
    }

    private func restartAfterBackoff() {
        nextRestartAt = nil
        pendingRestart = nil
        guard current == nil, desired == .running, !shuttingDown else { return }
        restarts += 1
        bindListeners()
        spawnTunnel()
    }

    var crashLoop: Bool { backoff.crashLoop() }

    // MARK: links

    func attach(_ peer: ControlServer.Peer, hello: ControlMessage, descriptors: [Int32]) {
        let pid = peer.credentials.pid
        if current?.pid == pid {
            descriptors.forEach { close($0) }
            current?.attached = true
            current?.link = peer.connection
            current?.state = hello.state ?? .starting
            current?.lastPong = Date()
        } else if draining[pid] != nil {
            descriptors.forEach { close($0) }
            draining[pid]?.link = peer.connection
        } else if current == nil, ProcessProbe.isTunnel(pid, servingGroup: paths.root.path) {
            // A tunnel that outlived the previous supervisor.
            var tunnel = Tunnel(pid: pid)
            tunnel.adopted = true
            tunnel.link = peer.connection
            tunnel.state = hello.state ?? .ready
            current = tunnel
            let names = hello.listeners ?? []
            if listeners.isEmpty && names.count == descriptors.count {
                listeners = zip(names, descriptors).map {
                    ListenSocket(name: $0, descriptor: $1, bound: ListenSocket.localAddress($1) ?? $0)
                }
            } else {
                descriptors.forEach { close($0) }
            }
            logger.notice(
                "adopted the running tunnel", metadata: ["TUNNEL_PID": "\(pid)", "LISTENERS": "\(names.joined(separator: ", "))"])
            defer { reconcileFirewall() }
            watchAdopted(pid)
            reconcileListeners()
        } else {
            descriptors.forEach { close($0) }
            logger.warning("refused a link from an unknown process", metadata: ["PEER_PID": "\(pid)"])
            peer.connection.close()
            return
        }
        if current?.pid == pid, current?.state == .ready { tunnelBecameReady() }
        handOver()
    }

    /// Only one tunnel accepts at a time: a new one waits in standby until
    /// every tunnel it replaces has closed its listeners (the kernel keeps
    /// the connections that arrive meanwhile in the backlog).
    func handOver() {
        guard let tunnel = current, tunnel.link != nil, !tunnel.serveSent, tunnel.state == .starting else { return }
        for (pid, old) in draining where old.drainRequestedAt == nil {
            kill(pid, SIGTERM)
            draining[pid]?.drainRequestedAt = Date()
        }
        for (pid, old) in draining where old.state != .draining {
            // Still accepting; a silent one is killed after two seconds.
            if let asked = old.drainRequestedAt, Date().timeIntervalSince(asked) > 2 {
                logger.warning("a replaced tunnel did not stop accepting; killing it", metadata: ["TUNNEL_PID": "\(pid)"])
                kill(pid, SIGKILL)
                draining[pid]?.state = .draining
                continue
            }
            return
        }
        do {
            try tunnel.link?.send(ControlMessage(.serve))
            current?.serveSent = true
        } catch {
            logger.error("cannot tell the tunnel to serve", metadata: ["TUNNEL_PID": "\(tunnel.pid)", "ERROR": "\(error)"])
        }
    }

    /// A replacement that has not attached yet, and the tunnel it is to
    /// replace, which serves until then (it is asked to drain only once the
    /// replacement has attached).
    var pendingReplacement: (replacement: Tunnel, serving: Tunnel)? {
        guard let tunnel = current, !tunnel.serveSent, !tunnel.adopted,
            let serving = draining.values.first(where: { $0.drainRequestedAt == nil })
        else { return nil }
        return (tunnel, serving)
    }

    /// A started tunnel that has not attached by `attachDeadline` hangs in
    /// its start-up: it is killed, and its exit handled as any other (the
    /// tunnel it was to replace stays in charge; a first one is retried).
    func killUnattached() {
        guard let tunnel = current, !tunnel.attached, !tunnel.adopted, !tunnel.attachTimedOut,
            Date().timeIntervalSince(tunnel.startedAt) > attachDeadline
        else { return }
        current?.attachTimedOut = true
        logger.error(
            "the new tunnel did not attach within \(String(format: "%g", attachDeadline)) s; killing it",
            metadata: ["TUNNEL_PID": "\(tunnel.pid)", "SERVING_PID": "\(pendingReplacement.map { String($0.serving.pid) } ?? "none")"])
        kill(tunnel.pid, SIGKILL)
    }

    /// An adopted tunnel is not our child: no waitpid, so poll for its end.
    private func watchAdopted(_ pid: Int32) {
        Task { [weak self] in
            await ChildProcesses.waitUntilGone(pid)
            await self?.tunnelExited(TunnelLauncher.Exit(pid: pid, description: "exited (adopted; status unknown)", clean: false))
        }
    }

    func linkMessage(_ message: ControlMessage, from pid: Int32) {
        switch message.kind {
        case .state:
            if let state = message.state {
                if current?.pid == pid {
                    current?.state = state
                    if state == .ready {
                        current?.lastPong = Date()
                        tunnelBecameReady()
                    }
                } else {
                    draining[pid]?.state = state
                    handOver()
                }
            }
        case .pong:
            if current?.pid == pid { current?.lastPong = Date() } else { draining[pid]?.lastPong = Date() }
        default:
            break
        }
    }

    func linkEnded(pid: Int32) {
        if current?.pid == pid { current?.link = nil }
        draining[pid]?.link = nil
    }

    func tunnelBecameReady() {
        reconcileFirewall()
        if !notifiedReady {
            notifiedReady = true
            Systemd.ready(status: pill())
            logger.info("ready", metadata: ["STATUS": "\(pill())"])
        }
    }

    /// Hands the tunnel the full listener set when it differs from its own.
    func reconcileListeners() {
        guard let link = current?.link else { return }
        do {
            try link.send(ControlMessage(.listeners, listeners: listeners.map(\.name)), descriptors: listeners.map(\.descriptor))
        } catch {
            logger.error("cannot send listeners to the tunnel", metadata: ["ERROR": "\(error)"])
        }
    }

    // MARK: settings and CA

    /// Reads and parses off the actor, which answers the tunnel's pings and
    /// the watchdog: a large file must not stall health. A read that
    /// finishes after a later one is dropped.
    func reloadSettings() async {
        let ticket = applied.beginRead()
        let snapshot = await AppliedSettings.read(paths.settings)
        guard applied.take(ticket) else { return }
        GroupDirectory.protectSettings(paths)
        if case let .applied(previous) = applied.apply(snapshot, logger: settingsLogger),
            previous.wantedListeners != settings.wantedListeners, desired == .running
        {
            bindListeners()
            reconcileListeners()
        }
        reconcileFirewall()
        Systemd.status(pill())
    }

    func setWebSummary(_ summary: String) {
        guard summary != webSummary else { return }
        webSummary = summary
        if notifiedReady { Systemd.status(pill()) }
    }

    func reloadCA() {
        protectSecrets()
        ca = CertificateAuthorityBootstrap.inspect(paths)
    }

    /// A key or token mirror a person copied in gets the tunnel-only ACL.
    func protectSecrets() {
        pairing.restoreMirror()
        SecretFiles.protect(paths, reader: launcher.identity.user, logger: Logger(label: "busymate.cert"))
    }

    // MARK: health, status, shutdown

    var isHealthy: Bool {
        if desired == .stopped || shuttingDown { return true }
        // While a replacement is pending, the tunnel that serves is the one to judge.
        if let tunnel = pendingReplacement?.serving ?? current {
            if tunnel.state == .ready {
                return tunnel.link == nil || Date().timeIntervalSince(tunnel.lastPong) < 2 * Self.unresponsiveAfter
            }
            return Date().timeIntervalSince(tunnel.startedAt) < 10
        }
        // Between a crash and its restart: healthy unless crash-looping.
        return nextRestartAt != nil && !crashLoop
    }

    /// A tunnel that answers no ping for this long is hung: replace it.
    static let unresponsiveAfter: TimeInterval = 5

    func tick() async {
        // A settings file that could not be read is tried again until it can.
        if applied.readFailed { await reloadSettings() }
        // A port that was busy (say, still held by a tunnel that is letting
        // it go) is tried again every tick.
        if desired == .running, !listenerErrors.isEmpty, !shuttingDown {
            let before = listeners.count
            bindListeners()
            if listeners.count != before { reconcileListeners() }
        }
        handOver()
        killUnattached()
        verifyFirewall(every: 5)
        reconcileFirewall()
        pingSeq += 1
        try? current?.link?.send(ControlMessage(.ping, seq: pingSeq))
        try? pendingReplacement?.serving.link?.send(ControlMessage(.ping, seq: pingSeq))
        if let tunnel = current, tunnel.state == .ready, tunnel.link != nil,
            Date().timeIntervalSince(tunnel.lastPong) > Self.unresponsiveAfter
        {
            // Its event loops are stuck; connections wait in the shared
            // accept queue for the replacement.
            logger.error("the tunnel stopped answering; killing it", metadata: ["TUNNEL_PID": "\(tunnel.pid)"])
            current?.lastPong = Date()
            kill(tunnel.pid, SIGKILL)
        }
        if isHealthy, Systemd.watchdogInterval != nil { Systemd.watchdog() }
        Systemd.status(pill())
    }

    /// SIGTERM: stop the tunnel gracefully first, then go; or, armed for a
    /// handover, leave it serving (and the firewall in place) for the next
    /// supervisor to adopt.
    func shutdown() async {
        shuttingDown = true
        Systemd.stopping()
        if handingOver {
            pendingRestart?.cancel()
            logger.notice(
                "stopping without the tunnel: it goes on serving for the next supervisor to adopt",
                metadata: ["TUNNEL_PID": "\(current.map { String($0.pid) } ?? "none")"])
            return
        }
        // Traffic goes direct again before the tunnel stops taking it.
        reconcileFirewall()
        pendingRestart?.cancel()
        var pids = Array(draining.keys)
        if let current { pids.append(current.pid) }
        await ChildProcesses.stop(pids, within: settings.drainSeconds + 2, logger: logger, what: "the tunnel")
        logger.info("stopped")
    }
}
