import Foundation

/// The tunnel's write of renewed admissions: an enrolled device in use
/// keeps its grant a full admission ahead.
public enum GrantRenewal {
    /// Extends the grants of `addresses` in `settings.json`, under its
    /// lock. Only a device still enrolled from that address and still
    /// granted is extended: a revoke or a removed grant meanwhile wins.
    public static func write(_ addresses: [String], to url: URL, now: Date = Date()) throws {
        try SettingsFile.edit(url) { root in
            guard let settings = try? AppSettings.decode(root).settings else { return }
            var grants = settings.access.grants.filter { $0.until > now }
            let same = { (a: String, b: String) in IPAddressText.canonical(a) == IPAddressText.canonical(b) }
            var changed = false
            for ip in addresses {
                let enrolled = settings.devices.list.contains { device in
                    guard let enrolment = device.enrolment, !enrolment.revoked, let by = enrolment.redeemedBy else { return false }
                    return same(by, ip)
                }
                guard enrolled, grants.contains(where: { same($0.address, ip) }),
                      let grant = AppSettings.Grant(address: ip, until: now.addingTimeInterval(AppSettings.Enrolment.admission))
                else { continue }
                grants = grants.filter { !same($0.address, ip) } + [grant]
                changed = true
            }
            guard changed else { return }
            var access = root["access"] ?? JSONNode(.object([]))
            access.set("grants", JSONNode(.array(grants.map(\.node))))
            root.set("access", access)
        }
    }
}
