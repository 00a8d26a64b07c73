import BusymateShared
import Foundation
import Logging

/// Opens enrolment links: the first device to open one is admitted (a
/// grant for its address, renewed by the tunnel while it sends traffic)
/// and bound to the device's name; anyone else is refused and logged.
struct EnrolmentDesk {
    let paths: GroupPaths
    private let logger = Logger(label: "busymate.devices")

    enum Outcome: Equatable {
        case admitted(device: String)
        case unknown
        case revoked(device: String)
        case expired(device: String)
        case usedElsewhere(device: String)
        case unavailable(String)
    }

    /// Decided and written under the settings file's lock, so two devices
    /// opening one link at once cannot both have it.
    func open(token: String, client: String, now: Date = Date()) -> Outcome {
        var outcome = Outcome.unknown
        do {
            try SettingsFile.edit(paths.settings) { root in
                let settings = try AppSettings.decode(root).settings
                guard let device = settings.enrolling(token: token), var enrolment = device.enrolment else { return }
                switch enrolment.verdict(client: client, now: now) {
                case .revoked: outcome = .revoked(device: device.name)
                case .expired: outcome = .expired(device: device.name)
                case .usedElsewhere: outcome = .usedElsewhere(device: device.name)
                case let .admit(first):
                    if first {
                        enrolment.redeemedBy = client
                        enrolment.redeemedAt = now
                    }
                    let list = settings.devices.list.map { other in
                        var other = other
                        if other.name == device.name {
                            other.address = client
                            other.enrolment = enrolment
                        } else if other.address.map(IPAddressText.canonical) == IPAddressText.canonical(client), other.port != nil {
                            // One address names one device: the one enrolled from it now.
                            other.address = nil
                        }
                        return other
                    }.filter { $0.port != nil || $0.address != nil }
                    var devices = root["devices"] ?? JSONNode(.object([]))
                    devices.set("list", JSONNode(.array(list.map(\.node))))
                    root.set("devices", devices)
                    let until = now.addingTimeInterval(AppSettings.Enrolment.admission)
                    var grants = settings.access.grants.filter { $0.until > now && IPAddressText.canonical($0.address) != IPAddressText.canonical(client) }
                    if let grant = AppSettings.Grant(address: client, until: until) { grants.append(grant) }
                    var access = root["access"] ?? JSONNode(.object([]))
                    access.set("grants", JSONNode(.array(grants.map(\.node))))
                    root.set("access", access)
                    outcome = .admitted(device: device.name)
                }
            }
        } catch {
            outcome = .unavailable("\(error)")
        }
        log(outcome, client: client)
        if case .admitted = outcome, let notifier = try? Notifier(paths: paths, role: "web-enrol") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
        return outcome
    }

    private func log(_ outcome: Outcome, client: String) {
        let metadata: Logger.Metadata = ["CLIENT": "\(client)"]
        switch outcome {
        case let .admitted(device):
            logger.info("enrolment link opened: \(client) admitted as \(device)", metadata: metadata.merging(["DEVICE": "\(device)"]) { a, _ in a })
        case .unknown:
            logger.warning("refused an enrolment link nobody issued (or one replaced since)", metadata: metadata)
        case let .revoked(device):
            logger.warning("refused \(device)'s enrolment link: it was revoked", metadata: metadata.merging(["DEVICE": "\(device)"]) { a, _ in a })
        case let .expired(device):
            logger.warning("refused \(device)'s enrolment link: it expired", metadata: metadata.merging(["DEVICE": "\(device)"]) { a, _ in a })
        case let .usedElsewhere(device):
            logger.warning("refused \(device)'s enrolment link from another address: another device opened it first",
                           metadata: metadata.merging(["DEVICE": "\(device)"]) { a, _ in a })
        case let .unavailable(why):
            logger.error("could not open an enrolment link: \(why)", metadata: metadata)
        }
    }
}
