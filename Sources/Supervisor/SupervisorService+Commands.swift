import BusymateShared
import Foundation

/// `busymate tunnel restart|stop|start`: the VPN toggle and a replacement
/// that keeps the listening sockets.
extension SupervisorService {
    func tunnelRestart() -> ControlMessage {
        guard desired == .running else { return .reply(ok: false, "the tunnel is stopped; use `busymate tunnel start`") }
        pendingRestart?.cancel()
        pendingRestart = nil
        nextRestartAt = nil
        if listeners.isEmpty { bindListeners() }
        let old = current?.pid
        spawnTunnel()
        restarts += 1
        logger.info(
            "restarting the tunnel",
            metadata: ["OLD_PID": "\(old.map(String.init) ?? "none")", "TUNNEL_PID": "\(current.map { String($0.pid) } ?? "none")"])
        return .reply(
            ok: true, "tunnel restarting (old pid \(old.map(String.init) ?? "none"), new pid \(current.map { String($0.pid) } ?? "none"))")
    }

    func tunnelStop() -> ControlMessage {
        desired = .stopped
        pendingRestart?.cancel()
        pendingRestart = nil
        nextRestartAt = nil
        if let tunnel = current {
            draining[tunnel.pid] = tunnel
            draining[tunnel.pid]?.drainRequestedAt = Date()
            kill(tunnel.pid, SIGTERM)
            current = nil
        }
        // Capture off means the port is closed, not a silent backlog.
        for socket in listeners { close(socket.descriptor) }
        listeners = []
        reconcileFirewall()
        logger.notice("tunnel stopped by request; the proxy port is closed")
        return .reply(ok: true, "tunnel stopped")
    }

    func tunnelStart() -> ControlMessage {
        guard desired == .stopped || current == nil else {
            return .reply(ok: true, "the tunnel is already running (pid \(current?.pid ?? 0))")
        }
        desired = .running
        backoff.reset()
        bindListeners()
        spawnTunnel()
        return .reply(ok: true, "tunnel starting (pid \(current.map { String($0.pid) } ?? "none"))")
    }
}

/// The package's upgrade (`busymate tunnel handover`, root only, then
/// `systemctl restart busymate`): the old supervisor goes, its children stay
/// and keep accepting, the new supervisor adopts them (as after a crash),
/// and `busymate tunnel restart` / `web restart` then replace them with the
/// new binaries while the listening sockets stay open.
extension SupervisorService {
    /// How long an armed handover waits for the stop it is meant for.
    static let handoverWindow: TimeInterval = 120

    func armHandover() -> ControlMessage {
        guard desired == .running, current != nil else {
            return .reply(ok: false, "no tunnel is running to hand over; a restart starts a new one")
        }
        handoverUntil = Date().addingTimeInterval(Self.handoverWindow)
        logger.notice(
            "armed for a handover: the next stop leaves the tunnel and the web front running",
            metadata: ["WITHIN_SECONDS": "\(Int(Self.handoverWindow))"])
        return .reply(
            ok: true,
            "the next stop within \(Int(Self.handoverWindow)) s leaves the tunnel and the web front running for the next supervisor")
    }

    var isHandingOver: Bool { handoverUntil.map { $0 > Date() } ?? false }
}
