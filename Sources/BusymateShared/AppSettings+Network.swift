import Foundation

/// The settings for devices on the network: transparent mode, the DNS
/// forwarder, the onboarding listener, named devices and who may connect.
extension AppSettings {
    /// `transparent`: what the nftables rules redirect, and to which port.
    public struct Transparent: Sendable, Equatable {
        /// The transparent listener (bound on 0.0.0.0 and [::]).
        public var port = 9180
        /// Destination TCP ports redirected to it.
        public var ports = [80, 443]
        /// Interfaces whose forwarded traffic is captured (the gateway).
        public var interfaces: [String] = []
        public init() {}
    }

    /// `dns`: the forwarder the rules send UDP and TCP 53 to.
    public struct DNS: Sendable, Equatable {
        public var port = 9153
        /// Empty: the nameservers of /etc/resolv.conf.
        public var servers: [String] = []
        public init() {}
    }

    /// `devices`: the port pool and the named devices.
    public struct Devices: Sendable, Equatable {
        public var portPool = 9100...9199
        /// A device is online while traffic arrived in this window.
        public var idleSeconds: Double = 90
        /// Where device ports are bound.
        public var host = "0.0.0.0"
        public var list: [NamedDevice] = []
        public init() {}

        public func named(_ name: String) -> NamedDevice? { list.first { $0.name == name } }
    }

    /// A device by its own port or by its address.
    public struct NamedDevice: Sendable, Equatable {
        public var name: String
        public var port: Int?
        public var address: String?
        public var enrolment: Enrolment?
        public init(name: String, port: Int? = nil, address: String? = nil) {
            self.name = name
            self.port = port
            self.address = address
        }

        /// Letters, digits, `-`, `_`, `.`; 1 to 64 bytes (it goes in logs, filters and URLs).
        public static func isValidName(_ name: String) -> Bool {
            // "." and ".." would be path segments in its page's address.
            !name.isEmpty && name.utf8.count <= 64 && name.utf8.contains(where: { $0 != UInt8(ascii: ".") })
                && name.utf8.allSatisfy {
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                        || $0 == UInt8(ascii: ".")
                }
        }
    }

    /// `access`: who may use a listener that is not on loopback.
    public struct Access: Sendable, Equatable {
        public var allow: [IPNetwork] = []
        /// `busymate allow IP --ttl …` (the seed's IP whitelist).
        public var grants: [Grant] = []
        public init() {}

        /// Whether `address` may connect at `now` (loopback and this
        /// machine's own addresses are decided by the caller).
        public func admits(_ address: String, now: Date = Date()) -> Bool {
            allow.contains { $0.contains(address) } || grantedUntil(address, now: now) != nil
        }

        /// When the last grant that covers `address` ends (nil: none does).
        public func grantedUntil(_ address: String, now: Date = Date()) -> Date? {
            grants.filter { $0.until > now && $0.network.contains(address) }.map(\.until).max()
        }
    }

    public struct Grant: Sendable, Equatable {
        public var address: String
        public var until: Date
        public var network: IPNetwork
        public init?(address: String, until: Date) {
            guard let network = IPNetwork(address) else { return nil }
            self.address = address
            self.until = until
            self.network = network
        }
    }

    /// Interface names as the kernel allows them (IFNAMSIZ), and nothing an
    /// nft script could read as syntax.
    public static func isValidInterfaceName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 15
            && name.utf8.allSatisfy {
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                    || $0 == UInt8(ascii: ".")
            }
    }

    static let networkKeys: [String: Set<String>] = [
        "transparent": ["port", "ports", "interfaces"],
        "dns": ["port", "servers"],
        "onboarding": ["listen"],
        "devices": ["port_pool", "idle_seconds", "host", "list"],
        "access": ["allow", "grants"],
    ]
}

extension AppSettings.Reader {
    func port(_ node: JSONNode, path: String, minimum: Int = 1) throws(SettingsError) -> Int {
        let value = try number(node, path: path)
        guard value == value.rounded(), value >= Double(minimum), value <= 65535 else {
            throw SettingsError(message: "must be a port from \(minimum) to 65535", position: node.position, keyPath: path)
        }
        return Int(value)
    }

    mutating func readNetwork(_ root: JSONNode, into s: inout AppSettings) throws(SettingsError) {
        if let node = root["transparent"] {
            try object(node, path: "transparent")
            if let port = node["port"] { s.transparent.port = try self.port(port, path: "transparent.port", minimum: 1024) }
            if let ports = node["ports"] {
                guard case let .array(items) = ports.value, !items.isEmpty else {
                    throw SettingsError(
                        message: "expected a non-empty array of ports", position: ports.position, keyPath: "transparent.ports")
                }
                var list: [Int] = []
                for (i, item) in items.enumerated() {
                    let p = try port(item, path: "transparent.ports[\(i)]")
                    guard p != 53 else {
                        throw SettingsError(
                            message: "53 is DNS: the forwarder (dns.port) takes it", position: item.position,
                            keyPath: "transparent.ports[\(i)]")
                    }
                    if !list.contains(p) { list.append(p) }
                }
                s.transparent.ports = list
            }
            if let node = node["interfaces"] {
                s.transparent.interfaces = []
                for (i, item) in try strings(node, path: "transparent.interfaces").enumerated() {
                    guard AppSettings.isValidInterfaceName(item.text) else {
                        throw SettingsError(
                            message: "\"\(item.text)\" is not an interface name", position: item.position,
                            keyPath: "transparent.interfaces[\(i)]")
                    }
                    if !s.transparent.interfaces.contains(item.text) { s.transparent.interfaces.append(item.text) }
                }
            }
        }
        if let node = root["dns"] {
            try object(node, path: "dns")
            if let port = node["port"] { s.dns.port = try self.port(port, path: "dns.port", minimum: 1024) }
            if let servers = node["servers"] {
                s.dns.servers = []
                for (i, item) in try strings(servers, path: "dns.servers").enumerated() {
                    guard IPAddressText.isLiteral(item.text) else {
                        throw SettingsError(
                            message: "\"\(item.text)\" is not an IP address", position: item.position, keyPath: "dns.servers[\(i)]")
                    }
                    s.dns.servers.append(item.text)
                }
            }
        }
        if s.dns.port == s.transparent.port, root["dns"] != nil || root["transparent"] != nil {
            throw SettingsError(
                message: "dns.port and transparent.port must differ", position: root["dns"]?["port"]?.position, keyPath: "dns.port")
        }
        if let node = root["onboarding"] {
            try object(node, path: "onboarding")
            if let listen = node["listen"], listen.value != .null {
                let text = try string(listen, path: "onboarding.listen")
                guard let address = ListenAddress(text), IPAddressText.isLiteral(address.host) else {
                    throw SettingsError(
                        message: "\"\(text)\" is not \"address:port\" with an IP address (e.g. \"192.168.1.20:9092\")",
                        position: listen.position, keyPath: "onboarding.listen")
                }
                s.onboardingListen = address
            }
        }
        if let node = root["devices"] { try readDevices(node, into: &s) }
        try checkPorts(root, s)
        if let node = root["access"] {
            try object(node, path: "access")
            if let allow = node["allow"] {
                s.access.allow = []
                for (i, item) in try strings(allow, path: "access.allow").enumerated() {
                    guard let network = IPNetwork(item.text) else {
                        throw SettingsError(
                            message: "\"\(item.text)\" is not an address or CIDR range (e.g. \"192.168.1.0/24\", \"fd00::/8\")",
                            position: item.position, keyPath: "access.allow[\(i)]")
                    }
                    s.access.allow.append(network)
                }
            }
            if let grants = node["grants"] {
                guard case let .array(items) = grants.value else {
                    throw SettingsError(
                        message: "expected an array, found \(grants.value.typeName)", position: grants.position, keyPath: "access.grants")
                }
                s.access.grants = []
                for (i, item) in items.enumerated() {
                    let path = "access.grants[\(i)]"
                    try object(item, path: "access.grants[]")
                    guard let addressNode = item["address"], let untilNode = item["until"] else {
                        throw SettingsError(message: "needs \"address\" and \"until\"", position: item.position, keyPath: path)
                    }
                    let address = try string(addressNode, path: "\(path).address")
                    let untilText = try string(untilNode, path: "\(path).until")
                    guard let until = ISO8601DateFormatter().date(from: untilText) else {
                        throw SettingsError(
                            message: "\"\(untilText)\" is not a UTC time such as \"2026-11-25T10:00:00Z\"", position: untilNode.position,
                            keyPath: "\(path).until")
                    }
                    guard let grant = AppSettings.Grant(address: address, until: until) else {
                        throw SettingsError(
                            message: "\"\(address)\" is not an IP address", position: addressNode.position, keyPath: "\(path).address")
                    }
                    s.access.grants.append(grant)
                }
            }
        }
    }

    /// Two listeners on one port fail to bind, or worse, the redirect
    /// reaches the wrong one (the web page answering devices' traffic).
    func checkPorts(_ root: JSONNode, _ s: AppSettings) throws(SettingsError) {
        var taken: [Int: String] = [:]
        for address in s.listen where address.port != 0 { taken[address.port] = "proxy.listen" }
        if s.webListen.port != 0 { taken[s.webListen.port] = "web.listen" }
        if let onboarding = s.onboardingListen, onboarding.port != 0 { taken[onboarding.port] = "onboarding.listen" }
        let own: [(Int, String, JSONNode?)] =
            [
                (s.transparent.port, "transparent.port", root["transparent"]?["port"]),
                (s.dns.port, "dns.port", root["dns"]?["port"]),
            ]
            + s.devices.list.enumerated().compactMap { i, device in
                device.port.map {
                    (
                        $0, "devices.list[\(i)].port",
                        root["devices"]?["list"].flatMap { list in
                            if case let .array(items) = list.value, i < items.count { return items[i]["port"] } else { return nil }
                        }
                    )
                }
            }
        for (port, key, node) in own {
            if let other = taken[port] {
                throw SettingsError(message: "port \(port) is \(other)'s already", position: node?.position ?? root.position, keyPath: key)
            }
            taken[port] = key
        }
    }

    private mutating func readDevices(_ node: JSONNode, into s: inout AppSettings) throws(SettingsError) {
        try object(node, path: "devices")
        if let pool = node["port_pool"] {
            let text = try string(pool, path: "devices.port_pool")
            let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let low = parts[0], let high = parts[1], low >= 1024, high <= 65535, low <= high, high - low < 10_000
            else {
                throw SettingsError(
                    message: "\"\(text)\" is not a range of ports such as \"9100-9199\" (1024 to 65535, at most 10000 ports)",
                    position: pool.position, keyPath: "devices.port_pool")
            }
            s.devices.portPool = low...high
        }
        if let idle = node["idle_seconds"] {
            let value = try number(idle, path: "devices.idle_seconds")
            guard value >= 1, value <= 86_400 else {
                throw SettingsError(
                    message: "must be between 1 and 86400 seconds", position: idle.position, keyPath: "devices.idle_seconds")
            }
            s.devices.idleSeconds = value
        }
        if let host = node["host"] {
            let text = try string(host, path: "devices.host")
            guard IPAddressText.isLiteral(text) else {
                throw SettingsError(message: "\"\(text)\" is not an IP address", position: host.position, keyPath: "devices.host")
            }
            s.devices.host = text
        }
        if let list = node["list"] {
            guard case let .array(items) = list.value else {
                throw SettingsError(
                    message: "expected an array, found \(list.value.typeName)", position: list.position, keyPath: "devices.list")
            }
            s.devices.list = []
            for (i, item) in items.enumerated() {
                let path = "devices.list[\(i)]"
                try object(item, path: "devices.list[]")
                guard let nameNode = item["name"] else {
                    throw SettingsError(message: "needs a \"name\"", position: item.position, keyPath: path)
                }
                let name = try string(nameNode, path: "\(path).name")
                guard AppSettings.NamedDevice.isValidName(name) else {
                    throw SettingsError(
                        message: "\"\(name)\" is not a device name (letters, digits, - _ .; at most 64)", position: nameNode.position,
                        keyPath: "\(path).name")
                }
                guard s.devices.named(name) == nil else {
                    throw SettingsError(message: "\"\(name)\" is listed twice", position: nameNode.position, keyPath: "\(path).name")
                }
                var device = AppSettings.NamedDevice(name: name)
                if let portNode = item["port"], portNode.value != .null {
                    let p = try port(portNode, path: "\(path).port", minimum: 1024)
                    guard !s.devices.list.contains(where: { $0.port == p }) else {
                        throw SettingsError(
                            message: "port \(p) is already another device's", position: portNode.position, keyPath: "\(path).port")
                    }
                    device.port = p
                }
                if let addressNode = item["address"], addressNode.value != .null {
                    let address = try string(addressNode, path: "\(path).address")
                    guard IPAddressText.isLiteral(address) else {
                        throw SettingsError(
                            message: "\"\(address)\" is not an IP address", position: addressNode.position, keyPath: "\(path).address")
                    }
                    device.address = address
                }
                if let enrolmentNode = item["enrolment"], enrolmentNode.value != .null {
                    device.enrolment = try enrolment(enrolmentNode, path: "\(path).enrolment")
                }
                guard device.port != nil || device.address != nil else {
                    throw SettingsError(message: "needs a \"port\" or an \"address\"", position: item.position, keyPath: path)
                }
                s.devices.list.append(device)
            }
        }
    }
}

extension AppSettings {
    /// Said in the log and in `status` for a listener others could reach
    /// while `access.allow` is empty: only this machine and grants get in.
    public func exposureWarning(_ address: ListenAddress) -> String? {
        guard !address.isLoopback, access.allow.isEmpty else { return nil }
        return
            "\(address) is not on loopback and access.allow is empty: other machines are refused unless granted (busymate allow IP); list their networks in access.allow"
    }
}
