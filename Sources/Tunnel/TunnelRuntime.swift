import BusymateShared
import Cloud
import Foundation
import Logging
import NIOCore
import NIOPosix
import ProxyEngine

/// The tunnel process (the Network Extension's role): serves the proxy on
/// the listeners it was handed, applies settings as they are saved, keeps
/// `status.json` current and stays attached to whichever supervisor runs.
public actor TunnelRuntime {
    private struct Listener {
        var socket: ListenSocket
        var serving: ServingListener
        var identity: UInt64?
    }

    private let paths: GroupPaths
    private let server: ProxyServer
    private let dns: DNSForwarder
    private let devicesLogger = Logger(label: "busymate.devices")
    /// The server's capture writer (nil: capture off).
    private let capture: CaptureWriter?
    private let notifier: Notifier?
    private let privileges: String
    private let startedAt = Date()
    private let logger = Logger(label: "busymate.tunnel")
    private let settingsLogger = Logger(label: "busymate.settings")
    private let ipcLogger = Logger(label: "busymate.ipc")

    private var applied: AppliedSettings
    private var listeners: [String: Listener] = [:]
    /// Sockets handed over but not served yet: a supervised tunnel accepts
    /// only once the supervisor says `serve`, so that two tunnels never
    /// accept on one socket at the same time.
    private var held: [ListenSocket] = []
    private var serving = false
    private var listenerErrors: [String: String] = [:]
    private var state = TunnelState.starting
    private var link: LinkConnection?
    private var lastWritten: TunnelStatus?
    /// Said once, not every half second.
    private var statusWriteFailed = false

    /// Why there is no store at all (it could not be opened).
    private let storeError: String?
    /// The cloud sinks (none: no store to send from).
    private let cloud: [CloudSink]
    /// The account's Realtime link (none: no store).
    private let realtime: RealtimeLink?

    init(
        paths: GroupPaths, server: ProxyServer, dns: DNSForwarder, capture: CaptureWriter?, notifier: Notifier?, privileges: String,
        snapshot: SettingsSnapshot,
        storeError: String? = nil, cloud: [CloudSink] = [], realtime: RealtimeLink? = nil
    ) {
        self.dns = dns
        self.cloud = cloud
        self.realtime = realtime
        self.capture = capture
        self.paths = paths
        self.storeError = storeError
        self.server = server
        self.notifier = notifier
        self.privileges = privileges
        applied = AppliedSettings(snapshot)
    }

    // MARK: listeners

    func serve(_ sockets: [ListenSocket]) async {
        for socket in sockets {
            let identity = ListenSocket.identity(socket.descriptor)
            if let existing = listeners[socket.name], existing.identity == identity {
                close(socket.descriptor)
                continue
            }
            if let existing = listeners.removeValue(forKey: socket.name) {
                try? await existing.serving.channel.close()
            }
            do {
                let serving = try await serveListener(socket)
                listeners[socket.name] = Listener(socket: socket, serving: serving, identity: identity)
                listenerErrors[socket.name] = nil
                logger.info("serving", metadata: ["LISTENER": "\(socket.bound)"])
            } catch {
                close(socket.descriptor)
                listenerErrors[socket.name] = "\(error)"
                logger.error("cannot serve a listener", metadata: ["LISTENER": "\(socket.name)", "ERROR": "\(error)"])
            }
        }
    }

    /// Each socket as its name says: the proxy, the transparent front end,
    /// a device's port, or the DNS forwarder.
    private func serveListener(_ socket: ListenSocket) async throws -> ServingListener {
        switch ListenerRole.parse(socket.name)?.role {
        case .proxy?, nil: return try await server.serve(descriptor: socket.descriptor)
        case .transparent?: return try await server.serve(descriptor: socket.descriptor, frontEnd: .transparent)
        case let .device(name)?: return try await server.serve(descriptor: socket.descriptor, frontEnd: .device(name))
        case .dnsUDP?: return ServingListener(channel: try await dns.serveUDP(descriptor: socket.descriptor), quiesce: nil)
        case .dnsTCP?:
            let (channel, quiesce) = try await dns.serveTCP(descriptor: socket.descriptor)
            return ServingListener(channel: channel, quiesce: quiesce)
        }
    }

    /// Keeps `sockets` until `startServing`.
    func hold(_ sockets: [ListenSocket]) {
        held.forEach { close($0.descriptor) }
        held = sockets
    }

    func startServing() async {
        guard !serving, state != .draining else { return }
        serving = true
        let sockets = held
        held = []
        await serve(sockets)
        await becomeReady()
    }

    /// The supervisor's full set: serve new ones, stop the ones not listed.
    func replaceListeners(with sockets: [ListenSocket]) async {
        guard serving else {
            hold(sockets)
            return
        }
        let wanted = Set(sockets.map(\.name))
        for (name, listener) in listeners where !wanted.contains(name) {
            listeners[name] = nil
            // Connections it accepted carry on; it just accepts no more.
            try? await listener.serving.channel.close()
            logger.info("stopped serving", metadata: ["LISTENER": "\(listener.socket.bound)"])
        }
        await serve(sockets)
        await publish()
    }

    func becomeReady() async {
        state = .ready
        logger.info("ready", metadata: ["LISTENERS": "\(listeners.values.map(\.socket.bound).sorted().joined(separator: ", "))"])
        await publish()
    }

    // MARK: supervisor link

    /// Sends `message` up the link; false when there is no supervisor to hear it.
    func tellSupervisor(_ message: ControlMessage) -> Bool {
        guard let link else { return false }
        do {
            try link.send(message)
            return true
        } catch {
            ipcLogger.warning("cannot reach the supervisor", metadata: ["ERROR": "\(error)"])
            return false
        }
    }

    func attachIfNeeded() {
        guard link == nil, FileManager.default.fileExists(atPath: paths.controlSocket.path) else { return }
        let connection: LinkConnection
        do {
            connection = LinkConnection(socket: try UnixSocket.connect(path: paths.controlSocket.path))
            let sockets = serving ? listeners.values.map(\.socket).sorted { $0.name < $1.name } : held
            // The supervisor keeps copies, so the listeners outlive this tunnel.
            try connection.send(
                ControlMessage(.hello, pid: getpid(), listeners: sockets.map(\.name), state: state),
                descriptors: sockets.map(\.descriptor))
        } catch {
            ipcLogger.debug("supervisor not reachable yet", metadata: ["ERROR": "\(error)"])
            return
        }
        link = connection
        ipcLogger.info("attached to the supervisor")
        let messages = connection.messages(name: "busymate-link")
        Task { [weak self] in
            for await incoming in messages {
                await self?.handle(incoming)
            }
            await self?.linkEnded(connection)
        }
    }

    private func linkEnded(_ connection: LinkConnection) {
        guard link === connection else { return }
        link = nil
        guard state != .draining else { return }
        ipcLogger.notice("the supervisor went away; serving on and waiting for the next one")
    }

    private func handle(_ incoming: LinkConnection.Incoming) async {
        let message = incoming.message
        switch message.kind {
        case .listeners:
            let names = message.listeners ?? []
            guard names.count == incoming.descriptors.count else {
                incoming.descriptors.forEach { close($0) }
                ipcLogger.error("listener message with \(names.count) names and \(incoming.descriptors.count) descriptors; ignored")
                return
            }
            let sockets = zip(names, incoming.descriptors).map {
                ListenSocket(name: $0, descriptor: $1, bound: ListenSocket.localAddress($1) ?? $0)
            }
            await replaceListeners(with: sockets)
        case .ping:
            try? link?.send(ControlMessage(.pong, pid: getpid(), state: state, seq: message.seq))
        case .serve:
            await startServing()
        default:
            incoming.descriptors.forEach { close($0) }
        }
    }

    // MARK: settings

    /// Reads and parses off the actor, which answers the supervisor's pings;
    /// a read that finishes after a later one is dropped.
    /// A settings file that could not be read is tried again (every half
    /// second, from the main loop) until it can.
    func retrySettingsIfUnread() async {
        if applied.readFailed { await reloadSettings() }
    }

    func reloadSettings() async {
        let ticket = applied.beginRead()
        let snapshot = await AppliedSettings.read(paths.settings)
        guard applied.take(ticket) else { return }
        if case .applied = applied.apply(snapshot, logger: settingsLogger) {
            server.interception.apply(applied.settings)
            server.rules.apply(applied.settings)
            server.timeouts.apply(applied.settings)
            server.breakpoints.apply(applied.settings)
            server.devices.apply(applied.settings)
            dns.apply(applied.settings)
            capture?.apply(applied.settings)
        }
        for sink in cloud { await sink.setMode(applied.settings.mode.rawValue) }
        await realtime?.setMode(applied.settings.mode.rawValue)
        await publish()
    }

    /// The CA changed on disk (or `caDidChange`): reload it; idempotent.
    func reloadCA() async {
        // A new CA: no device has trusted it yet, whatever it trusted before.
        if server.interception.reloadCA(paths) { server.devices.forgetTrust() }
        await publish()
    }

    // MARK: status

    private func counters() -> TrafficCounters {
        var counters = server.stats.snapshot(now: Self.monotonic())
        counters.breakpointsHeld = server.breakpoints.heldCount
        return counters
    }

    func status() -> TunnelStatus {
        let names = Set(listeners.keys).union(listenerErrors.keys).sorted()
        var status = TunnelStatus(
            pid: getpid(), uid: getuid(), gid: getgid(), privileges: privileges, state: state, mode: applied.settings.mode.rawValue,
            startedAt: startedAt, updatedAt: Date(), settingsSha256: applied.sha256, settingsError: applied.error?.description,
            listeners: names.map { ListenerStatus(address: $0, bound: listeners[$0]?.socket.bound, error: listenerErrors[$0]) },
            counters: counters(), supervisorAttached: link != nil, lastError: server.interception.upstreamError,
            interception: server.interception.caError.map { "off: \($0)" } ?? "on",
            store: storeError ?? capture?.storeProblem ?? "ok")
        let (devices, network) = server.devices.snapshot()
        status.devices = devices
        status.network = network
        status.network?.dnsQueries = dns.queries
        return status
    }

    /// Extends the grants of enrolled devices in use (at most once an hour
    /// each), in `settings.json`, so a restart keeps them: on the thread
    /// pool and not awaited by the status tick (a lock others can hold).
    func renewGrants() {
        let due = server.devices.renewalsDue()
        guard !due.isEmpty else { return }
        let paths = self.paths
        let logger = devicesLogger
        Task {
            do {
                let extended = try await NIOThreadPool.singleton.runIfActive { try GrantRenewal.write(due, to: paths.settings) }
                if !extended.isEmpty {
                    logger.info(
                        "renewed the admission of enrolled devices in use", metadata: ["CLIENTS": "\(extended.joined(separator: ", "))"])
                }
            } catch {
                logger.warning(
                    "could not renew the admission of enrolled devices",
                    metadata: ["CLIENTS": "\(due.joined(separator: ", "))", "ERROR": "\(error)"])
            }
        }
    }

    /// Devices that came online or went offline: posted and logged.
    func sweepPresence() {
        for change in server.devices.sweep() {
            notifier?.post(.devicePresenceChanged, payload: change.device)
            devicesLogger.info(
                change.online ? "device online" : "device offline",
                metadata: ["DEVICE": "\(change.device)", "SOURCE": "\(change.source ?? "?")"])
        }
    }

    /// Writes `status.json` when something a reader cares about changed,
    /// and tells the supervisor about state changes.
    func publish() async {
        var current = status()
        var sinks: [CloudSinkStatus] = []
        for sink in cloud {
            if var status = await sink.status() {
                if status.sink == "postgrest" { status.realtime = await realtime?.status() }
                sinks.append(status)
            }
        }
        current.cloud = sinks.isEmpty ? nil : sinks
        // The file as another tunnel left it: a draining predecessor may
        // write it after this one did, then remove it as it exits.
        let written = TunnelStatus.read(paths.status)
        if let last = lastWritten {
            var a = last, b = current
            a.updatedAt = .distantPast
            b.updatedAt = .distantPast
            a.counters.requestsPerSecond = 0
            b.counters.requestsPerSecond = 0
            if a == b && written?.pid == getpid() { return }
        }
        // Draining while a successor serves: the file is the successor's now.
        let replaced =
            state == .draining
            && written.map { $0.pid != getpid() && ProcessProbe.isAlive($0.pid) && !ProcessProbe.isZombieOrGone($0.pid) } ?? false
        if !replaced { write(current) }
        current.updatedAt = Date()
        let stateChanged = lastWritten?.state != current.state
        lastWritten = current
        if stateChanged {
            notifier?.post(.tunnelStateChanged, payload: current.state.rawValue)
            try? link?.send(ControlMessage(.state, pid: getpid(), state: current.state))
        }
    }

    private func write(_ current: TunnelStatus) {
        do {
            let data = try StatusCoding.encoder.encode(current)
            do {
                try AtomicFile.write(data, to: paths.status, mode: 0o644, sync: false)
                statusWriteFailed = false
            } catch {
                // A full disk has no room for a new file, but the old one's
                // block can take the new text: status must say "disk full".
                try AtomicFile.overwriteInPlace(data, at: paths.status)
                if !statusWriteFailed {
                    logger.warning("status.json rewritten in place (no room for a new file)", metadata: ["ERROR": "\(error)"])
                }
                statusWriteFailed = true
            }
        } catch {
            if !statusWriteFailed { logger.error("cannot write status.json", metadata: ["ERROR": "\(error)"]) }
            statusWriteFailed = true
        }
    }

    // MARK: shutdown

    /// Stops accepting, tells the supervisor (which then lets the next
    /// tunnel accept), and lets requests in flight finish.
    func drain() async {
        guard state != .draining else { return }
        logger.info("draining", metadata: ["GRACE_SECONDS": "\(applied.settings.drainSeconds)"])
        let open = listeners.values.map(\.serving)
        listeners.removeAll()
        hold([])
        let connectionsDone = await server.stopAccepting(open)
        state = .draining
        await publish()
        await server.finishDrain(connectionsDone, grace: .milliseconds(Int64(applied.settings.drainSeconds * 1000)))
    }

    func finish() {
        notifier?.close()
        link?.close()
        // Only this process's status goes: a newer tunnel may own the file.
        if let written = TunnelStatus.read(paths.status), written.pid == getpid() {
            unlink(paths.status.path)
        }
    }

    static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
