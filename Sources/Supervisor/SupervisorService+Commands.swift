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
/// `systemctl restart busymate`, then `busymate tunnel handover --finish`):
/// the old supervisor goes, its children stay and keep accepting, the new
/// supervisor adopts them (as after a crash), and each adopted child is then
/// replaced by the new binary while the listening sockets stay open.
extension SupervisorService {
    /// How long an armed handover waits for the stop it is meant for: the
    /// restart comes right after, and a stop meant as a stop must not leave
    /// the children behind.
    static let handoverWindow: TimeInterval = 30

    func handoverCommand(_ message: ControlMessage) -> ControlMessage {
        guard message.message == "cancel" else { return armHandover() }
        guard handoverUntil != nil else { return .reply(ok: true, "no handover was armed") }
        handoverUntil = nil
        logger.notice("handover disarmed: the next stop stops the tunnel and the web front")
        return .reply(ok: true, "handover disarmed")
    }

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

    var isArmedForHandover: Bool { handoverUntil.map { $0 > Date() } ?? false }

    /// At the stop: decided once, for the tunnel, the firewall and the web front alike.
    func beginStop() -> Bool {
        handingOver = isArmedForHandover
        return handingOver
    }
}
