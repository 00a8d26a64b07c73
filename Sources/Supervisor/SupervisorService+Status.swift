import BusymateShared
import Foundation

/// What the supervisor says of itself: systemd's STATUS= line and the
/// readiness card `busymate status` shows.
extension SupervisorService {
    /// The one line for systemd's STATUS=, in the style of the iOS pill.
    func pill() -> String {
        var parts: [String] = []
        if let error = applied.error { parts.append("settings.json invalid at \(error)") }
        let pending = pendingReplacement
        let serving = pending?.serving ?? current
        let tunnelStatus = TunnelStatus.read(paths.status).flatMap { $0.pid == serving?.pid ? $0 : nil }
        switch (desired, serving?.state) {
        case (.stopped, _): parts.append("tunnel stopped")
        case (_, .ready?):
            var ports: [String] = []
            // The explicit proxy's ports (transparent, DNS and device ports are said otherwise).
            for listener in listeners where ListenerRole.parse(listener.name)?.role ?? .proxy == .proxy {
                let port = ":" + (listener.bound.split(separator: ":").last.map(String.init) ?? "?")
                if !ports.contains(port) { ports.append(port) }
            }
            // The mode first, as DESIGN's example: `proxy :9090 · 42 req/s · 7 flows · 3 devices · CA ok`.
            if settings.mode == .transparent { parts.append("transparent :\(settings.transparent.port)") }
            parts.append("proxy \(ports.joined(separator: ","))")
            if let counters = tunnelStatus?.counters {
                parts.append("\(Int(counters.requestsPerSecond.rounded())) req/s")
                parts.append("\(counters.connectionsActive) flows")
                if let held = counters.breakpointsHeld, held > 0 { parts.append("\(held) held") }
            }
            let online = tunnelStatus?.devices?.filter(\.online).count ?? 0
            parts.append("\(online) device\(online == 1 ? "" : "s")")
            if let store = tunnelStatus?.store, store != "ok" { parts.append("capture failing: \(store)") }
        case (_, nil) where crashLoop: parts.append("tunnel crash-looping: \(lastExit ?? "?")")
        case (_, nil): parts.append("tunnel restarting")
        case let (_, state?): parts.append("tunnel \(state.rawValue)")
        }
        if pending != nil { parts.append("replacement starting") }
        if let webSummary { parts.append(webSummary) }
        if let cloud = cloudReport(tunnelStatus).pill { parts.append(cloud) }
        parts.append(ca.error == nil ? "CA ok" : "CA missing")
        return parts.joined(separator: " · ")
    }

    func report() -> StatusReport {
        // While a replacement is pending, the tunnel shown is the one serving.
        let pending = pendingReplacement
        let shown = pending?.serving ?? current
        let tunnelStatus = TunnelStatus.read(paths.status).flatMap { $0.pid == shown?.pid ? $0 : nil }
        let state: TunnelState
        if desired == .stopped {
            state = .stopped
        } else if let shown {
            state = shown.state
        } else {
            state = crashLoop ? .failed : .restarting
        }
        var tunnel = StatusReport.Tunnel(
            pid: shown?.pid, uid: tunnelStatus?.uid, state: state, privileges: tunnelStatus?.privileges,
            settingsSha256: tunnelStatus?.settingsSha256, settingsError: tunnelStatus?.settingsError,
            startedAt: tunnelStatus?.startedAt ?? shown?.startedAt, restarts: restarts, crashLoop: crashLoop, lastExit: lastExit,
            nextRestartInSeconds: nextRestartAt.map { max(0, $0.timeIntervalSinceNow) }, adopted: shown?.adopted ?? false,
            interception: tunnelStatus?.interception, lastError: tunnelStatus?.lastError, store: tunnelStatus?.store)
        tunnel.replacement = pending.map { pending in
            let waited = Date().timeIntervalSince(pending.replacement.startedAt)
            return .init(
                pid: pending.replacement.pid, state: pending.replacement.state, startedAt: pending.replacement.startedAt,
                attached: pending.replacement.attached, killInSeconds: pending.replacement.attached ? nil : max(0, attachDeadline - waited))
        }
        let listenerStatus = settings.wantedListeners.map { wanted in
            ListenerStatus(
                address: wanted.name, bound: listeners.first { $0.name == wanted.name }?.bound,
                error: listenerErrors[wanted.name], warning: settings.exposureWarning(wanted.address))
        }
        var report = StatusReport(
            group: paths.root.path, mode: settings.mode.rawValue,
            supervisor: .init(
                running: true, pid: getpid(), uptimeSeconds: Date().timeIntervalSince(startedAt), settingsSha256: applied.sha256,
                version: BusymateVersion.full),
            tunnel: tunnel, listeners: listenerStatus,
            ca: .init(
                present: ca.present, trusted: CertificateAuthorityBootstrap.isTrusted(ca), error: ca.error, subject: ca.subject,
                fingerprintSha256: ca.fingerprint, notAfter: ca.notAfter),
            settings: .init(
                path: paths.settings.path, valid: applied.error == nil, error: applied.error?.description, unknownKeys: applied.unknownKeys),
            counters: tunnelStatus?.counters ?? TrafficCounters())
        report.network = networkStatus(tunnelStatus)
        report.cloud = cloudReport(tunnelStatus)
        return report
    }

    func networkStatus(_ tunnelStatus: TunnelStatus?) -> NetworkStatus {
        verifyFirewall(every: 1)
        let presence = tunnelStatus?.network ?? NetworkPresence()
        var warnings = settings.wantedListeners.compactMap { settings.exposureWarning($0.address) }
        warnings = warnings.reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
        if settings.mode == .transparent, settings.transparent.interfaces.isEmpty {
            warnings.append(
                "transparent.interfaces is empty: only this machine's own traffic is captured (list the interfaces devices route through)")
        }
        if let error = firewall.error { warnings.append("the transparent rules: \(error)") }
        if settings.mode == .transparent, firewall.installed == nil, firewall.error == nil, current?.state == .ready {
            warnings.append("the transparent rules are off: \(firewallOffReason)")
        }
        return NetworkStatus(
            mode: settings.mode.rawValue, liveMode: presence.liveMode(configured: settings.mode.rawValue), rules: rulesState,
            quicRejected: quicRejected, refused: presence.refused, dnsQueries: presence.dnsQueries,
            bothSeen: presence.transparentTraffic && presence.proxyTraffic, idleSeconds: settings.devices.idleSeconds, warnings: warnings,
            table: firewall.table)
    }
}
