import BusymateShared
import Foundation
import Logging
import NIOPosix

/// Opens enrolment links: the first device to open one is admitted (a
/// grant for its address, renewed by the tunnel while it sends traffic)
/// and bound to the device's name; anyone else is refused and logged.
/// A refusal is decided on the settings in force and writes nothing; only
/// an admission takes the settings file's lock, and decides again under it.
final class EnrolmentDesk: Sendable {
    let paths: GroupPaths
    private let logger = Logger(label: "busymate.devices")
    private let refusals = LogLimit()

    init(paths: GroupPaths) { self.paths = paths }

    enum Outcome: Equatable {
        /// `first`: this device has not opened it before (the page asks it to confirm).
        case admissible(device: String, first: Bool)
        case admitted(device: String)
        case unknown
        case revoked(device: String)
        case expired(device: String)
        case usedElsewhere(device: String)
        case unavailable
    }

    /// What opening the link would come to, on the settings in force.
    func check(token: String, client: String, settings: AppSettings, now: Date = Date()) -> Outcome {
        let outcome = Self.verdict(token: token, client: client, settings: settings, now: now)
        if case .admissible = outcome { return outcome }
        log(outcome, client: client)
        return outcome
    }

    /// Admits `client`: decided again and written under the lock, so two
    /// devices opening one link at once cannot both have it. On the thread
    /// pool (a lock, a read, a write).
    func admit(token: String, client: String, now: Date = Date()) async -> Outcome {
        let paths = self.paths
        let result: Result<Outcome, Error>
        do {
            result = .success(
                try await NIOThreadPool.singleton.runIfActive { () throws -> Outcome in
                    var outcome = Outcome.unknown
                    try SettingsFile.edit(paths.settings, requireLock: true) { root in
                        let settings = try AppSettings.decode(root).settings
                        outcome = Self.verdict(token: token, client: client, settings: settings, now: now)
                        guard case let .admissible(device, first) = outcome else { return }
                        try DeviceList.admit(device, client: client, first: first, in: &root, now: now)
                        outcome = .admitted(device: device)
                    }
                    return outcome
                })
        } catch {
            result = .failure(error)
        }
        switch result {
        case let .success(outcome):
            log(outcome, client: client)
            if case .admitted = outcome, let notifier = try? Notifier(paths: paths, role: "web-enrol") {
                notifier.post(.settingsDidChange)
                notifier.close()
            }
            return outcome
        case let .failure(error):
            logger.error("could not record an enrolment", metadata: ["CLIENT": "\(client)", "ERROR": "\(error)"])
            return .unavailable
        }
    }

    static func verdict(token: String, client: String, settings: AppSettings, now: Date) -> Outcome {
        guard let device = settings.enrolling(token: token), let enrolment = device.enrolment else { return .unknown }
        switch enrolment.verdict(client: client, now: now) {
        case .revoked: return .revoked(device: device.name)
        case .expired: return .expired(device: device.name)
        case .usedElsewhere: return .usedElsewhere(device: device.name)
        case let .admit(first): return .admissible(device: device.name, first: first)
        }
    }

    private func log(_ outcome: Outcome, client: String) {
        let said: String
        let key: String
        var metadata: Logger.Metadata = ["CLIENT": "\(client)"]
        switch outcome {
        case .admissible, .unavailable:
            return
        case let .admitted(device):
            logger.info(
                "enrolment link opened: \(client) admitted as \(device)", metadata: metadata.merging(["DEVICE": "\(device)"]) { a, _ in a })
            return
        case .unknown:
            said = "refused an enrolment link nobody issued (or one replaced since)"
            key = "unknown"
        case let .revoked(device):
            said = "refused \(device)'s enrolment link: it was revoked"
            key = "revoked " + device
            metadata["DEVICE"] = "\(device)"
        case let .expired(device):
            said = "refused \(device)'s enrolment link: it expired"
            key = "expired " + device
            metadata["DEVICE"] = "\(device)"
        case let .usedElsewhere(device):
            said = "refused \(device)'s enrolment link from another address: another device opened it first"
            key = "elsewhere " + device
            metadata["DEVICE"] = "\(device)"
        }
        guard let unsaid = refusals.allow(key, now: DeviceClock.now()) else { return }
        if unsaid > 0 { metadata["SINCE_LAST"] = "\(unsaid) more" }
        logger.warning("\(said)", metadata: metadata)
    }
}

/// Seconds on the monotonic clock.
enum DeviceClock {
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
