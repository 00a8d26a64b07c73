import BusymateShared
import Foundation
import Logging

/// Keeps one `busymate-web` running, as `SupervisorService` keeps the
/// tunnel: binds `web.listen` and hands it over, restarts the child with
/// backoff, adopts one an earlier supervisor left, and replaces it without
/// closing the port (the new one serves before the old one is stopped).
actor WebKeeper {
    struct Child {
        var pid: Int32
        var startedAt = Date()
        var adopted = false
        var ready = false
        var link: LinkConnection?
        var lastPong = Date()
        /// When it was replaced or stopped.
        var retiredAt: Date?
    }

    enum Desired { case running, stopped }

    let paths: GroupPaths
    let launcher: TunnelLauncher
    let logger = Logger(label: "busymate.web")
    /// Told the one-line summary whenever it changes (systemd's STATUS=).
    let summaryChanged: @Sendable (String) async -> Void

    var address: ListenAddress
    var socket: ListenSocket?
    var bindError: String?
    /// `onboarding.listen`: the device pages, served by the same child.
    var onboardingAddress: ListenAddress?
    var onboardingSocket: ListenSocket?
    var onboardingError: String?
    var current: Child?
    /// Replaced children, stopped once their successor serves.
    var retiring: [Int32: Child] = [:]
    var desired = Desired.running
    var backoff: RestartBackoff
    var restarts = 0
    var lastExit: String?
    var pendingRestart: Task<Void, Never>?
    var shuttingDown = false
    /// `start` ran (the health tick must not start a child before it looked for one to adopt).
    var started = false
    var pingSeq = 0
    /// Ports below 1024 the supervisor's command line allows.
    var privilegedPorts = PrivilegedPorts()

    init(
        paths: GroupPaths, launcher: TunnelLauncher, address: ListenAddress, onboarding: ListenAddress? = nil, maxBackoff: Double = 30,
        summaryChanged: @escaping @Sendable (String) async -> Void = { _ in }
    ) {
        self.paths = paths
        self.launcher = launcher
        self.address = address
        onboardingAddress = onboarding
        backoff = RestartBackoff(max: maxBackoff)
        self.summaryChanged = summaryChanged
    }

    func allow(_ ports: PrivilegedPorts) { privilegedPorts = ports }

    // MARK: start-up

    /// Waits briefly for a web front an earlier supervisor left to attach;
    /// starts one otherwise.
    func start() async {
        defer { started = true }
        if let pid = ProcessProbe.find(named: "busymate-web", servingGroup: paths.root.path) {
            logger.notice("a web front is already running; waiting for it to attach", metadata: ["WEB_PID": "\(pid)"])
            for _ in 0..<30 {
                if current != nil { return }
                try? await Task.sleep(for: .milliseconds(100))
            }
            logger.warning("the running web front did not attach; stopping it and starting a new one", metadata: ["WEB_PID": "\(pid)"])
            kill(pid, SIGTERM)
        }
        bind()
        spawn()
    }

    func bind() {
        bindOnboarding()
        guard socket == nil else { return }
        do {
            try privilegedPorts.check(address)
            let bound = try ListenSocket.bind(address, backlog: 256)
            socket = bound
            bindError = nil
            logger.info("listening for the web page", metadata: ["LISTENER": "\(bound.bound)"])
            if !address.isLoopback {
                logger.notice(
                    "the web page is reachable from other machines; it still needs its token (busymate web url)",
                    metadata: ["LISTENER": "\(bound.bound)"])
            }
        } catch {
            if bindError != "\(error)" {
                logger.error("cannot listen for the web page", metadata: ["LISTENER": "\(address)", "ERROR": "\(error)"])
            }
            bindError = "\(error)"
        }
    }

    func closeSocket() {
        if let socket { close(socket.descriptor) }
        socket = nil
        closeOnboarding()
    }

    private var onboardingName: String? { onboardingAddress.map { "onboarding@\($0)" } }

    func bindOnboarding() {
        guard onboardingSocket == nil, let address = onboardingAddress, let name = onboardingName else { return }
        do {
            try privilegedPorts.check(address)
            let bound = try ListenSocket.bind(address, backlog: 256)
            onboardingSocket = ListenSocket(name: name, descriptor: bound.descriptor, bound: bound.bound)
            onboardingError = nil
            logger.info(
                "listening for device onboarding (/proxy.pac, /ca.pem, /ca.der; no token)", metadata: ["LISTENER": "\(bound.bound)"])
        } catch {
            if onboardingError != "\(error)" {
                logger.error("cannot listen for device onboarding", metadata: ["LISTENER": "\(address)", "ERROR": "\(error)"])
            }
            onboardingError = "\(error)"
        }
    }

    func closeOnboarding() {
        if let onboardingSocket { close(onboardingSocket.descriptor) }
        onboardingSocket = nil
    }

    func spawn() {
        guard desired == .running, !shuttingDown, let socket else { return }
        // The web front cannot start without its token: one removed (to
        // rotate it) is written anew here, not only at the supervisor's start.
        do {
            try WebToken.ensure(paths, group: PrivilegeDrop.lookupGroup(launcher.identity.group))
        } catch {
            logger.error("cannot write the web token", metadata: ["ERROR": "\(error)"])
        }
        do {
            let pid = try launcher.spawn(listeners: [socket] + (onboardingSocket.map { [$0] } ?? [])) { [weak self] exit in
                Task { await self?.exited(exit) }
            }
            if var old = current {
                old.retiredAt = Date()
                retiring[old.pid] = old
            }
            current = Child(pid: pid)
            logger.info("started the web front", metadata: ["WEB_PID": "\(pid)"])
        } catch {
            lastExit = "cannot start: \(error)"
            logger.error("cannot start the web front", metadata: ["ERROR": "\(error)"])
            scheduleRestart()
        }
    }

    // MARK: the child's life

    func exited(_ exit: TunnelLauncher.Exit) async {
        if retiring.removeValue(forKey: exit.pid) != nil {
            logger.info("a replaced web front finished", metadata: ["WEB_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
            return
        }
        guard let ended = current, ended.pid == exit.pid else { return }
        current = nil
        lastExit = exit.description
        // A replacement that never served: the one it replaced serves on.
        if !ended.ready, !shuttingDown,
            let (pid, previous) = retiring.first(where: { ProcessProbe.isAlive($0.key) && !ProcessProbe.isZombieOrGone($0.key) })
        {
            retiring[pid] = nil
            current = previous
            logger.error(
                "the new web front exited before serving; the running one goes on",
                metadata: ["WEB_PID": "\(pid)", "EXIT": "\(exit.description)"])
            return
        }
        await summaryChanged(summary)
        if shuttingDown || desired == .stopped {
            logger.info("the web front stopped", metadata: ["WEB_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
            return
        }
        if exit.status == TunnelExitStatus.cannotStart {
            logger.error(
                "the web front cannot start (see its log); retrying with backoff",
                metadata: ["WEB_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
        } else {
            logger.error(
                "the web front exited unexpectedly; restarting it", metadata: ["WEB_PID": "\(exit.pid)", "EXIT": "\(exit.description)"])
        }
        scheduleRestart()
    }

    func scheduleRestart() {
        let delay = backoff.exited()
        pendingRestart?.cancel()
        pendingRestart = Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int(delay * 1000)))
            guard !Task.isCancelled else { return }
            await self?.restartAfterBackoff()
        }
    }

    private func restartAfterBackoff() {
        pendingRestart = nil
        guard current == nil, desired == .running, !shuttingDown else { return }
        restarts += 1
        bind()
        spawn()
    }

    var crashLoop: Bool { backoff.crashLoop() }

    // MARK: links

    func owns(_ pid: Int32) -> Bool { current?.pid == pid || retiring[pid] != nil }

    func attach(_ peer: ControlServer.Peer, hello: ControlMessage, descriptors: [Int32]) async {
        let pid = peer.credentials.pid
        if current?.pid == pid {
            descriptors.forEach { close($0) }
            current?.link = peer.connection
            current?.lastPong = Date()
            becameReady()
        } else if retiring[pid] != nil {
            descriptors.forEach { close($0) }
            retiring[pid]?.link = peer.connection
        } else if current == nil, desired == .running, !shuttingDown, isAdoptable(peer, hello: hello) {
            // A web front that outlived the previous supervisor: its socket becomes ours.
            var child = Child(pid: pid)
            child.adopted = true
            child.ready = true
            child.link = peer.connection
            current = child
            let names = hello.listeners ?? []
            for (name, fd) in zip(names, descriptors) {
                if socket == nil, name == address.description {
                    socket = ListenSocket(name: name, descriptor: fd, bound: ListenSocket.localAddress(fd) ?? name)
                } else if onboardingSocket == nil, name == onboardingName {
                    onboardingSocket = ListenSocket(name: name, descriptor: fd, bound: ListenSocket.localAddress(fd) ?? name)
                } else {
                    close(fd)
                }
            }
            descriptors.dropFirst(names.count).forEach { close($0) }
            logger.notice("adopted the running web front", metadata: ["WEB_PID": "\(pid)"])
            watchAdopted(pid)
        } else {
            descriptors.forEach { close($0) }
            logger.warning("refused a web link from an unknown process", metadata: ["PEER_PID": "\(pid)"])
            peer.connection.close()
            return
        }
        await summaryChanged(summary)
    }

    /// A web front an earlier supervisor started: our binary's name serving
    /// this group, as the user children drop to, on the address settings name.
    private func isAdoptable(_ peer: ControlServer.Peer, hello: ControlMessage) -> Bool {
        let pid = peer.credentials.pid
        let uid = geteuid() == 0 ? PrivilegeDrop.lookupUser(launcher.identity.user) : geteuid()
        return peer.credentials.uid == uid && hello.listeners?.first == address.description
            && (hello.listeners ?? []).dropFirst().allSatisfy { $0 == onboardingName }
            && ProcessProbe.isChild(pid, named: "busymate-web", servingGroup: paths.root.path)
    }

    /// The new child serves: the ones it replaces can go.
    private func becameReady() {
        current?.ready = true
        for pid in retiring.keys { kill(pid, SIGTERM) }
    }

    private func watchAdopted(_ pid: Int32) {
        Task { [weak self] in
            await ChildProcesses.waitUntilGone(pid)
            await self?.exited(TunnelLauncher.Exit(pid: pid, description: "exited (adopted; status unknown)", clean: false))
        }
    }

    func linkMessage(_ message: ControlMessage, from pid: Int32) {
        if message.kind == .pong, current?.pid == pid { current?.lastPong = Date() }
    }

    func linkEnded(pid: Int32) {
        if current?.pid == pid { current?.link = nil }
        retiring[pid]?.link = nil
    }

    // MARK: commands and settings

    func restart() -> ControlMessage {
        guard desired == .running else { return .reply(ok: false, "the web front is stopped; use `busymate web start`") }
        pendingRestart?.cancel()
        pendingRestart = nil
        bind()
        guard socket != nil else { return .reply(ok: false, "cannot listen on \(address): \(bindError ?? "?")") }
        let old = current?.pid
        spawn()
        restarts += 1
        return .reply(
            ok: true,
            "web front restarting (old pid \(old.map(String.init) ?? "none"), new pid \(current.map { String($0.pid) } ?? "none"))")
    }

    func stop() async -> ControlMessage {
        desired = .stopped
        pendingRestart?.cancel()
        pendingRestart = nil
        if var child = current {
            child.retiredAt = Date()
            retiring[child.pid] = child
            kill(child.pid, SIGTERM)
            current = nil
        }
        closeSocket()
        logger.notice("web front stopped by request; its port is closed")
        await summaryChanged(summary)
        return .reply(ok: true, "web front stopped")
    }

    func startCommand() -> ControlMessage {
        guard desired == .stopped || current == nil else {
            return .reply(ok: true, "the web front is already running (pid \(current?.pid ?? 0))")
        }
        desired = .running
        backoff.reset()
        bind()
        guard socket != nil else { return .reply(ok: false, "cannot listen on \(address): \(bindError ?? "?")") }
        spawn()
        return .reply(ok: true, "web front starting (pid \(current.map { String($0.pid) } ?? "none"))")
    }

    /// `web.listen` changed: a new socket, and a child serving it.
    func apply(_ settings: AppSettings) {
        if settings.onboardingListen != onboardingAddress {
            logger.info(
                "onboarding.listen changed",
                metadata: [
                    "FROM": "\(onboardingAddress.map(\.description) ?? "off")",
                    "TO": "\(settings.onboardingListen.map(\.description) ?? "off")",
                ])
            onboardingAddress = settings.onboardingListen
            closeOnboarding()
            onboardingError = nil
            if settings.webListen == address, desired == .running {
                bindOnboarding()
                // The child takes its sockets at start: a new one serves the new set.
                spawn()
                return
            }
        }
        guard settings.webListen != address else { return }
        logger.info("web.listen changed", metadata: ["FROM": "\(address)", "TO": "\(settings.webListen)"])
        address = settings.webListen
        closeSocket()
        bindError = nil
        guard desired == .running else { return }
        bind()
        spawn()
    }

    // MARK: health and status

    func tick() async {
        guard started, !shuttingDown else { return }
        if desired == .running, socket == nil {
            bind()
            // Bound at last (after a web.listen change, say): a child to serve it.
            if socket != nil, pendingRestart == nil { spawn() }
        } else if desired == .running, onboardingAddress != nil, onboardingSocket == nil {
            // The onboarding address was busy or not there yet (a LAN address comes up late).
            bindOnboarding()
            if onboardingSocket != nil, pendingRestart == nil { spawn() }
        }
        pingSeq += 1
        try? current?.link?.send(ControlMessage(.ping, seq: pingSeq))
        if let child = current, child.link != nil, Date().timeIntervalSince(child.lastPong) > 10 {
            logger.error("the web front stopped answering; killing it", metadata: ["WEB_PID": "\(child.pid)"])
            current?.lastPong = Date()
            kill(child.pid, SIGKILL)
        }
        // A replaced child that has not finished ten seconds on.
        for (pid, child) in retiring where Date().timeIntervalSince(child.retiredAt ?? Date()) > 10 {
            if ProcessProbe.isAlive(pid) && !ProcessProbe.isZombieOrGone(pid) {
                logger.warning("a replaced web front did not stop; killing it", metadata: ["WEB_PID": "\(pid)"])
                kill(pid, SIGKILL)
            }
        }
        await summaryChanged(summary)
    }

    var state: TunnelState {
        if desired == .stopped { return .stopped }
        if let current { return current.ready ? .ready : .starting }
        return crashLoop ? .failed : .restarting
    }

    func report() -> StatusReport.Web {
        var web = StatusReport.Web(
            state: state, pid: current?.pid, listen: address.description, bound: socket?.bound, error: bindError,
            restarts: restarts, lastExit: lastExit, adopted: current?.adopted ?? false)
        web.onboarding = onboardingAddress.map {
            StatusReport.Onboarding(listen: $0.description, bound: onboardingSocket?.bound, error: onboardingError)
        }
        return web
    }

    /// For the STATUS= line.
    var summary: String {
        switch state {
        case .ready: return "web :\(socket?.bound.split(separator: ":").last.map(String.init) ?? "?")"
        case .stopped: return "web stopped"
        default: return bindError.map { "web cannot listen: \($0)" } ?? "web \(state.rawValue)"
        }
    }

    /// `leaveRunning`: a handover (`SupervisorService.armHandover`); the
    /// child keeps serving for the next supervisor to adopt.
    func shutdown(leaveRunning: Bool = false) async {
        shuttingDown = true
        pendingRestart?.cancel()
        if leaveRunning { return }
        var pids = Array(retiring.keys)
        if let current { pids.append(current.pid) }
        // Its graceful stop takes at most 3.25 s (WebServer).
        await ChildProcesses.stop(pids, within: 4, logger: logger, what: "the web front")
    }
}
