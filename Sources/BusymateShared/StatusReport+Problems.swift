import Foundation

extension StatusReport {
    /// What makes `status` exit 1.
    public var problems: [String] {
        let r = self
        var problems: [String] = []
        if r.tunnel.state != .ready { problems.append("the tunnel is \(r.tunnel.state.rawValue)") }
        if let error = r.settings.error { problems.append("settings.json is invalid (\(error))") }
        for l in r.listeners where l.error != nil || l.bound == nil {
            problems.append("listener \(l.address) failed\(l.error.map { ": \($0)" } ?? "")")
        }
        if let store = r.tunnel.store, store != "ok" { problems.append("capture store: \(store)") }
        if !r.ca.present { problems.append("no CA") } else if let error = r.ca.error { problems.append("CA: \(error)") }
        // A web front still starting is no problem yet; one that cannot bind or keeps exiting is.
        if let web = r.web, web.error != nil || web.state == .failed || web.state == .restarting {
            problems.append("the web front is \(web.state.rawValue)\(web.error.map { ": \($0)" } ?? "")")
        }
        if let cloud = r.cloud, cloud.state == "re-pair required" { problems.append("cloud: \(cloud.detail) (busymate pair CODE)") }
        return problems
    }

    /// Without a supervisor: what the files say.
    public static func offline(_ paths: GroupPaths) -> StatusReport {
        let tunnel = TunnelStatus.read(paths.status).flatMap { ProcessProbe.isAlive($0.pid) ? $0 : nil }
        let snapshot = SettingsFile.read(paths.settings)
        return StatusReport(
            group: paths.root.path, mode: snapshot.settings?.mode.rawValue ?? "proxy",
            supervisor: .init(running: false, pid: nil, uptimeSeconds: nil, settingsSha256: nil),
            tunnel: .init(
                pid: tunnel?.pid, uid: tunnel?.uid, state: tunnel?.state ?? .absent, privileges: tunnel?.privileges,
                settingsSha256: tunnel?.settingsSha256, settingsError: tunnel?.settingsError, startedAt: tunnel?.startedAt,
                restarts: 0, crashLoop: false, lastExit: nil, nextRestartInSeconds: nil, adopted: false,
                interception: tunnel?.interception, lastError: tunnel?.lastError, store: tunnel?.store),
            listeners: tunnel?.listeners ?? [],
            ca: .init(
                present: FileManager.default.fileExists(atPath: paths.caPEM.path), trusted: false, error: nil, subject: nil,
                fingerprintSha256: nil, notAfter: nil),
            settings: .init(
                path: paths.settings.path, valid: snapshot.error == nil, error: snapshot.error?.description,
                unknownKeys: snapshot.unknownKeys),
            counters: tunnel?.counters ?? TrafficCounters())
    }
}
