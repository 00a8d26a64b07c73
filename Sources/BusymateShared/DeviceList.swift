import Foundation

/// Edits of `devices.list` and the grants enrolment gives, shared by the
/// CLI, the page and the onboarding listener; each runs inside
/// `SettingsFile.edit`, so it decides on the file as it is under the lock.
/// Entries are edited in place: keys this version does not own survive.
public enum DeviceList {
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Names a device: a port from the pool, or `address`. `existed`: it
    /// was named already (nothing written).
    public static func add(_ name: String, address: String?, in root: inout JSONNode) throws -> (
        device: AppSettings.NamedDevice, existed: Bool
    ) {
        guard AppSettings.NamedDevice.isValidName(name) else {
            throw Refusal("\"\(name)\" is not a device name (letters, digits, - _ .; at most 64)")
        }
        if let address, !IPAddressText.isLiteral(address) { throw Refusal("\"\(address)\" is not an IP address") }
        let settings = try AppSettings.decode(root).settings
        if let existing = settings.devices.named(name), address == nil || existing.address == address { return (existing, true) }
        var device = AppSettings.NamedDevice(name: name, address: address)
        if address == nil {
            let taken = Set(settings.devices.list.compactMap(\.port)).union(settings.listen.map(\.port))
                .union([settings.webListen.port, settings.transparent.port, settings.dns.port]).union(
                    settings.onboardingListen.map { [$0.port] } ?? [])
            guard let port = settings.devices.portPool.first(where: { !taken.contains($0) }) else {
                throw Refusal("devices.port_pool \(settings.devices.portPool.lowerBound)-\(settings.devices.portPool.upperBound) is full")
            }
            device.port = port
        }
        if settings.devices.named(name) != nil {
            try update(name, in: &root) { $0.address = address }
        } else {
            var devices = root["devices"] ?? JSONNode(.object([]))
            var items: [JSONNode] = []
            if case let .array(list)? = devices["list"]?.value { items = list }
            devices.set("list", JSONNode(.array(items + [device.node])))
            root.set("devices", devices)
        }
        return (device, false)
    }

    /// A new enrolment link for `name`. It replaces the old one, and what
    /// the old one admitted ends: a link names one device, and a new link
    /// is for enrolling it (again). Returns the address no longer admitted.
    public static func issueLink(_ name: String, lifetime: Double, in root: inout JSONNode, now: Date = Date())
        throws -> (token: String, expires: Date, ended: String?)
    {
        let settings = try AppSettings.decode(root).settings
        guard let device = settings.devices.named(name) else { throw Refusal("no device named \(name)") }
        let ended = device.enrolment.flatMap { $0.revoked ? nil : $0.redeemedBy }
        let token = AppSettings.Enrolment.newToken()
        let expires = now.addingTimeInterval(lifetime)
        try update(name, in: &root) {
            $0.enrolment = AppSettings.Enrolment(tokenSHA256: AppSettings.Enrolment.digest(token), expires: expires)
        }
        if let ended { endAdmission(of: ended, in: &root, now: now) }
        return (token, expires, ended)
    }

    /// Revokes `name`'s link; the admission it gave ends. Returns the
    /// address no longer admitted.
    public static func revoke(_ name: String, in root: inout JSONNode, now: Date = Date()) throws -> String? {
        let settings = try AppSettings.decode(root).settings
        guard let device = settings.devices.named(name) else { throw Refusal("no device named \(name)") }
        guard let enrolment = device.enrolment else { throw Refusal("\(name) has no enrolment link") }
        try update(name, in: &root) { $0.enrolment?.revoked = true }
        guard !enrolment.revoked, let by = enrolment.redeemedBy else { return nil }
        endAdmission(of: by, in: &root, now: now)
        return by
    }

    /// Forgets `name`; the admission its link gave ends.
    public static func remove(_ name: String, in root: inout JSONNode, now: Date = Date()) throws -> String? {
        let settings = try AppSettings.decode(root).settings
        guard let device = settings.devices.named(name) else { throw Refusal("no device named \(name)") }
        if var devices = root["devices"], case let .array(items)? = devices["list"]?.value {
            devices.set(
                "list",
                JSONNode(
                    .array(
                        items.filter { item in
                            if case let .string(n)? = item["name"]?.value { return n != name }
                            return true
                        })))
            root.set("devices", devices)
        }
        guard let enrolment = device.enrolment, !enrolment.revoked, let by = enrolment.redeemedBy else { return nil }
        endAdmission(of: by, in: &root, now: now)
        return by
    }

    /// The device `name` opened its link from `client`: the address is
    /// bound to it and admitted for a full admission (a longer grant is
    /// kept). Another enrolment from that address is superseded.
    public static func admit(_ name: String, client: String, first: Bool, in root: inout JSONNode, now: Date = Date()) throws {
        let settings = try AppSettings.decode(root).settings
        for other in settings.devices.list where other.name != name {
            let fromHere =
                other.enrolment.map { !$0.revoked && $0.redeemedBy.map(IPAddressText.host) == IPAddressText.host(client) } ?? false
            let named = other.address.map(IPAddressText.host) == IPAddressText.host(client) && other.port != nil
            guard fromHere || named else { continue }
            try update(other.name, in: &root) { device in
                if fromHere { device.enrolment?.revoked = true }
                if named { device.address = nil }
            }
        }
        try update(name, in: &root) { device in
            device.address = client
            if first {
                device.enrolment?.redeemedBy = client
                device.enrolment?.redeemedAt = now
            }
        }
        let until = now.addingTimeInterval(AppSettings.Enrolment.admission)
        putGrant(client, until: max(until, exactGrant(client, in: settings.access, now: now) ?? until), in: &root, now: now)
    }

    /// When the grant for exactly `address` ends (not a network's that
    /// covers it: those are the administrator's).
    public static func exactGrant(_ address: String, in access: AppSettings.Access, now: Date = Date()) -> Date? {
        access.grants.filter { $0.until > now && IPAddressText.host($0.address) == IPAddressText.host(address) }.map(\.until).max()
    }

    /// Sets the grant for exactly `address`, keeping other grants' entries
    /// as they are (expired ones are dropped).
    public static func putGrant(_ address: String, until: Date, in root: inout JSONNode, now: Date = Date()) {
        guard let grant = AppSettings.Grant(address: address, until: until) else { return }
        editGrants(in: &root, now: now) { items in
            var placed = false
            items = items.compactMap { item in
                guard case let .string(a)? = item["address"]?.value, IPAddressText.host(a) == IPAddressText.host(address) else {
                    return item
                }
                if placed { return nil }
                placed = true
                var item = item
                item.set("until", grant.node["until"])
                return item
            }
            if !placed { items.append(grant.node) }
        }
    }

    /// Ends the grant for exactly `address`, unless another live
    /// enrolment holds that address.
    static func endAdmission(of address: String, in root: inout JSONNode, now: Date) {
        if let settings = try? AppSettings.decode(root).settings,
            settings.devices.list.contains(where: { device in
                guard let e = device.enrolment, !e.revoked, let by = e.redeemedBy else { return false }
                return IPAddressText.host(by) == IPAddressText.host(address)
            })
        {
            return
        }
        editGrants(in: &root, now: now) { items in
            items = items.filter { item in
                guard case let .string(a)? = item["address"]?.value else { return true }
                return IPAddressText.host(a) != IPAddressText.host(address)
            }
        }
    }

    /// `access.grants`' entries, expired ones dropped.
    public static func editGrants(in root: inout JSONNode, now: Date, _ change: (inout [JSONNode]) -> Void) {
        var access = root["access"] ?? JSONNode(.object([]))
        var items: [JSONNode] = []
        if case let .array(list)? = access["grants"]?.value { items = list }
        items = items.filter { item in
            guard case let .string(text)? = item["until"]?.value, let until = ISO8601DateFormatter().date(from: text) else { return true }
            return until > now
        }
        change(&items)
        access.set("grants", JSONNode(.array(items)))
        root.set("access", access)
    }

    /// Applies `change` to the device named `name` and writes back only the
    /// keys a device has (`port`, `address`, `enrolment`'s own), in place.
    static func update(_ name: String, in root: inout JSONNode, _ change: (inout AppSettings.NamedDevice) -> Void) throws {
        let settings = try AppSettings.decode(root).settings
        guard var device = settings.devices.named(name) else { throw Refusal("no device named \(name)") }
        change(&device)
        guard var devices = root["devices"], case var .array(items)? = devices["list"]?.value,
            let index = items.firstIndex(where: { if case let .string(n)? = $0["name"]?.value { return n == name } else { return false } })
        else { throw Refusal("no device named \(name)") }
        var item = items[index]
        item.set("port", device.port.map { JSONNode(.number(String($0))) })
        item.set("address", device.address.map { JSONNode(.string($0)) })
        if let enrolment = device.enrolment {
            var node = item["enrolment"] ?? JSONNode(.object([]))
            // A new link's enrolment: nothing of the old one's state stays.
            if case let .string(old)? = node["token_sha256"]?.value, old != enrolment.tokenSHA256 { node = JSONNode(.object([])) }
            for (key, value) in enrolment.members { node.set(key, value) }
            item.set("enrolment", node)
        } else {
            item.remove("enrolment")
        }
        items[index] = item
        devices.set("list", JSONNode(.array(items)))
        root.set("devices", devices)
    }
}
