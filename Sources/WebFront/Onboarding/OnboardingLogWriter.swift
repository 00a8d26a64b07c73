import BusymateShared
import Foundation
import Logging

/// Counts what each device fetched from the onboarding listener and keeps
/// `onboarding.json` current (the readiness card's "CA downloaded").
actor OnboardingLogWriter {
    private let paths: GroupPaths
    private var log: OnboardingLog
    private let logger = Logger(label: "busymate.web")
    /// At most this many clients are kept (the oldest go).
    static let maxClients = 1_024

    init(paths: GroupPaths) {
        self.paths = paths
        log = OnboardingLog.read(paths.onboarding) ?? OnboardingLog()
    }

    enum Fetch { case ca, pac }

    func count(_ fetch: Fetch, by client: String) {
        var entry = log.clients[client] ?? OnboardingLog.Client()
        switch fetch {
        case .ca: entry.caDownloads += 1
        case .pac: entry.pacFetches += 1
        }
        entry.lastAt = Date()
        log.clients[client] = entry
        if log.clients.count > Self.maxClients,
            let oldest = log.clients.min(by: { ($0.value.lastAt ?? .distantPast) < ($1.value.lastAt ?? .distantPast) })?.key
        {
            log.clients[oldest] = nil
        }
        do {
            try AtomicFile.write(try StatusCoding.encoder.encode(log), to: paths.onboarding, mode: 0o644, sync: false)
        } catch {
            logger.warning("cannot write onboarding.json", metadata: ["ERROR": "\(error)"])
        }
    }
}
