import Foundation

/// The tunnel's write of renewed admissions: an enrolled device in use
/// keeps its grant a full admission ahead.
public enum GrantRenewal {
    /// Extends the grants of `addresses` in `settings.json`, under its
    /// lock. Only a device still enrolled from that address and still
    /// granted (exactly that address) is extended: a revoke or a removed
    /// grant meanwhile wins. Returns the addresses extended.
    @discardableResult
    public static func write(_ addresses: [String], to url: URL, now: Date = Date()) throws -> [String] {
        var extended: [String] = []
        try SettingsFile.edit(url) { root in
            guard let settings = try? AppSettings.decode(root).settings else { return }
            let until = now.addingTimeInterval(AppSettings.Enrolment.admission)
            for ip in addresses {
                let enrolled = settings.devices.list.contains { device in
                    guard let enrolment = device.enrolment, !enrolment.revoked, let by = enrolment.redeemedBy else { return false }
                    return IPAddressText.host(by) == IPAddressText.host(ip)
                }
                guard enrolled, let current = DeviceList.exactGrant(ip, in: settings.access, now: now), current < until else { continue }
                DeviceList.putGrant(ip, until: until, in: &root, now: now)
                extended.append(ip)
            }
        }
        return extended
    }
}
