import BusymateShared
import Foundation

/// What the supervisor says of itself: systemd's STATUS= line and the
/// readiness card `busymate status` shows.
extension SupervisorService {
    /// The one line for systemd's STATUS=, in the style of the iOS pill.
    func pill() -> String {
        var parts: [String] = []
        if let error = applied.error { parts.append("settings.json invalid at \(error)") }
        let tunnelStatus = TunnelStatus.read(paths.status).flatMap { $0.pid == current?.pid ? $0 : nil }
        switch (desired, current?.state) {
        case (.stopped, _): parts.append("tunnel stopped")
        case (_, .ready?):
            let ports = listeners.map { ":" + ($0.bound.split(separator: ":").last.map(String.init) ?? "?") }.joined(separator: ",")
            parts.append("proxy \(ports)")
            if let counters = tunnelStatus?.counters {
                parts.append("\(Int(counters.requestsPerSecond.rounded())) req/s")
                parts.append("\(counters.connectionsActive) flows")
                if let held = counters.breakpointsHeld, held > 0 { parts.append("\(held) held") }
            }
            if let store = tunnelStatus?.store, store != "ok" { parts.append("capture failing: \(store)") }
        case (_, nil) where crashLoop: parts.append("tunnel crash-looping: \(lastExit ?? "?")")
        case (_, nil): parts.append("tunnel restarting")
        case let (_, state?): parts.append("tunnel \(state.rawValue)")
        }
        if let webSummary { parts.append(webSummary) }
        parts.append(ca.error == nil ? "CA ok" : "CA missing")
        return parts.joined(separator: " · ")
    }

    func report() -> StatusReport {
        let tunnelStatus = TunnelStatus.read(paths.status).flatMap { $0.pid == current?.pid ? $0 : nil }
        let state: TunnelState
        if desired == .stopped {
            state = .stopped
        } else if let current {
            state = current.state
        } else {
            state = crashLoop ? .failed : .restarting
        }
        let tunnel = StatusReport.Tunnel(
            pid: current?.pid, uid: tunnelStatus?.uid, state: state, privileges: tunnelStatus?.privileges,
            settingsSha256: tunnelStatus?.settingsSha256, settingsError: tunnelStatus?.settingsError,
            startedAt: tunnelStatus?.startedAt ?? current?.startedAt, restarts: restarts, crashLoop: crashLoop, lastExit: lastExit,
            nextRestartInSeconds: nextRestartAt.map { max(0, $0.timeIntervalSinceNow) }, adopted: current?.adopted ?? false,
            interception: tunnelStatus?.interception, lastError: tunnelStatus?.lastError, store: tunnelStatus?.store)
        let listenerStatus = settings.listen.map { address in
            ListenerStatus(address: address.description, bound: listeners.first { $0.name == address.description }?.bound,
                           error: listenerErrors[address.description], warning: address.exposureWarning)
        }
        return StatusReport(
            group: paths.root.path, mode: settings.mode.rawValue,
            supervisor: .init(running: true, pid: getpid(), uptimeSeconds: Date().timeIntervalSince(startedAt), settingsSha256: applied.sha256),
            tunnel: tunnel, listeners: listenerStatus,
            ca: .init(present: ca.present, trusted: CertificateAuthorityBootstrap.isTrusted(ca), error: ca.error, subject: ca.subject,
                      fingerprintSha256: ca.fingerprint, notAfter: ca.notAfter),
            settings: .init(path: paths.settings.path, valid: applied.error == nil, error: applied.error?.description, unknownKeys: applied.unknownKeys),
            counters: tunnelStatus?.counters ?? TrafficCounters())
    }
}
