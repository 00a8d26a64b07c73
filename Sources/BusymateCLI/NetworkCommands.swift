import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// `busymate mode [proxy|transparent]`: the capture mode, applied live.
struct Mode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set the capture mode: proxy (clients set a proxy or a PAC URL) or transparent (nftables redirects traffic; the gateway).",
        discussion: "Setting it writes settings.json and waits (up to 10 s) until the supervisor has applied it.")

    @OptionGroup var options: GroupOption
    @Argument(help: "proxy or transparent") var mode: String?

    func run() async throws {
        let paths = options.paths
        guard let mode else {
            let report = try ControlClient.request(ControlMessage(.status), paths: paths).report
            guard let network = report?.network else { throw CLIError(description: "the supervisor gave no network status") }
            print("mode \(network.mode) · live \(network.liveMode)\(network.bothSeen ? " (proxy clients too)" : "") · rules \(network.rules)")
            return
        }
        guard let wanted = AppSettings.Mode(rawValue: mode) else { throw ValidationError("\"\(mode)\" is not a mode: use proxy or transparent") }
        try SettingsEdit.apply(paths) { root in root.set("mode", JSONNode(.string(wanted.rawValue))) }
        // The supervisor applies it: wait for the rules to say so.
        let deadline = Date().addingTimeInterval(10)
        var last: NetworkStatus?
        while Date() < deadline {
            guard let report = try? ControlClient.request(ControlMessage(.status), paths: paths).report else {
                print("mode \(wanted.rawValue) (the supervisor is not running: it applies it when it starts)")
                return
            }
            last = report.network
            if let network = report.network, network.mode == wanted.rawValue {
                if network.rules.hasPrefix("error") { throw CLIError(description: "mode \(wanted.rawValue), but the rules failed: \(network.rules)") }
                if wanted == .proxy ? network.rules == "off" : network.rules == "installed" {
                    print("mode \(wanted.rawValue) · rules \(network.rules)")
                    return
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CLIError(description: "mode \(wanted.rawValue) written, not applied within 10 s (rules \(last?.rules ?? "?")); see busymate status")
    }
}

/// `busymate devices`: named devices (a port from the pool, or an address)
/// and every client seen, with presence.
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List devices: named ones (their own port or address) and every client seen, online or not.",
        subcommands: [ListDevices.self, Add.self, Remove.self], defaultSubcommand: ListDevices.self)

    struct ListDevices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List devices (the default).")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON array.") var json = false

        func run() async throws {
            let rows = DeviceRows.read(options.paths)
            if json {
                let data = try StatusCoding.encoder.encode(rows)
                FileHandle.standardOutput.write(data + Data("\n".utf8))
                return
            }
            guard !rows.isEmpty else {
                print("no devices yet (busymate devices add NAME gives one its own port)")
                return
            }
            print(DeviceRows.table(rows))
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Name a device: it gets a port from devices.port_pool (or is known by --address). Idempotent; prints the port.")
        @OptionGroup var options: GroupOption
        @Argument var name: String
        @Option(help: "Name the device by this address instead of giving it a port.") var address: String?

        func run() async throws {
            guard AppSettings.NamedDevice.isValidName(name) else { throw ValidationError("\"\(name)\" is not a device name (letters, digits, - _ .; at most 64)") }
            if let address, !IPAddressText.isLiteral(address) { throw ValidationError("\"\(address)\" is not an IP address") }
            let paths = options.paths
            let before = try SettingsEdit.current(paths).settings
            if let existing = before.devices.named(name), address == nil || existing.address == address {
                print(existing.port.map(String.init) ?? existing.address ?? "")
                return
            }
            var chosen: Int?
            var already: String?
            try SettingsEdit.apply(paths) { root in
                let settings = try AppSettings.decode(root).settings
                // Again under the file's lock: another `add` may have just named it.
                if let existing = settings.devices.named(name), address == nil || existing.address == address {
                    already = existing.port.map(String.init) ?? existing.address
                    return
                }
                var list = settings.devices.list.filter { $0.name != name }
                if let address {
                    list.append(AppSettings.NamedDevice(name: name, address: address))
                } else {
                    let taken = Set(settings.devices.list.compactMap(\.port)).union(settings.listen.map(\.port))
                        .union([settings.webListen.port, settings.transparent.port, settings.dns.port]).union(settings.onboardingListen.map { [$0.port] } ?? [])
                    guard let port = settings.devices.portPool.first(where: { !taken.contains($0) }) else {
                        throw CLIError(description: "devices.port_pool \(settings.devices.portPool.lowerBound)-\(settings.devices.portPool.upperBound) is full")
                    }
                    chosen = port
                    list.append(AppSettings.NamedDevice(name: name, port: port))
                }
                DeviceRows.setList(list, in: &root)
            }
            print(already ?? chosen.map(String.init) ?? address ?? "")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget a named device (its port closes).")
        @OptionGroup var options: GroupOption
        @Argument var name: String

        func run() async throws {
            let paths = options.paths
            try SettingsEdit.apply(paths) { root in
                let settings = try AppSettings.decode(root).settings
                guard settings.devices.named(name) != nil else { throw CLIError(description: "no device named \(name)") }
                DeviceRows.setList(settings.devices.list.filter { $0.name != name }, in: &root)
            }
            print("removed \(name)")
        }
    }
}

/// `busymate allow`: the seed's IP whitelist, with a time to live.
struct Allow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Let an address use the listeners that are not on loopback for a while (access.grants), list or remove grants.",
        discussion: "access.allow (CIDRs, in settings.json) is for networks; this is for one device for a time. Expired grants are swept on each change.")

    @OptionGroup var options: GroupOption
    @Argument(help: "An IP address (or CIDR).") var address: String?
    @Option(help: "How long: 30m, 24h, 7d.") var ttl = "24h"
    @Flag(help: "Remove the grant for the address.") var remove = false
    @Flag(help: "Print a JSON array.") var json = false

    func run() async throws {
        let paths = options.paths
        guard let address else {
            let grants = try SettingsEdit.current(paths).settings.access.grants.filter { $0.until > Date() }
            if json {
                ExchangeJSON.write(ExchangeJSON.array(grants.map { ExchangeJSON.object([("address", ExchangeJSON.string($0.address)), ("until", ExchangeJSON.date($0.until))]) }))
            } else if grants.isEmpty {
                print("no grants (busymate allow IP --ttl 24h)")
            } else {
                for grant in grants { print("\(grant.address)  until \(ISO8601DateFormatter().string(from: grant.until))") }
            }
            return
        }
        guard IPNetwork(address) != nil else { throw ValidationError("\"\(address)\" is not an IP address or CIDR") }
        let seconds: Double
        do {
            seconds = try AppSettings.duration(ttl, path: "--ttl")
        } catch {
            throw ValidationError("--ttl \(ttl): \(error.message)")
        }
        let until = Date().addingTimeInterval(seconds)
        try SettingsEdit.apply(paths) { root in
            let settings = try AppSettings.decode(root).settings
            var grants = settings.access.grants.filter { $0.until > Date() && $0.address != address }
            if remove {
                guard settings.access.grants.contains(where: { $0.address == address }) else { throw CLIError(description: "\(address) has no grant") }
            } else if let grant = AppSettings.Grant(address: address, until: until) {
                grants.append(grant)
            }
            var access = root["access"] ?? JSONNode(.object([]))
            access.set("grants", JSONNode(.array(grants.map { grant in
                JSONNode(.object([("address", JSONNode(.string(grant.address))), ("until", JSONNode(.string(ISO8601DateFormatter().string(from: grant.until))))]))
            })))
            root.set("access", access)
        }
        print(remove ? "removed the grant for \(address)" : "allowed \(address) until \(ISO8601DateFormatter().string(from: until))")
    }
}

/// `busymate dns [FILTER]`: the queries the forwarder answered.
struct DNS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dns",
        abstract: "List DNS queries the forwarder answered (transparent mode), newest first; a filter narrows them (e.g. '~d example.com', '~device phone').")

    @OptionGroup var options: GroupOption
    @Argument(help: "A filter in mitmproxy's language, and-ed with ~dns.") var expression: [String] = []
    @Option(help: "How many.") var limit = 50
    @Flag(help: "Print a JSON array.") var json = false

    func run() async throws {
        var filter = TrafficRepository.Filter()
        filter.limit = max(1, limit)
        let text = expression.joined(separator: " ")
        var parsed = CaptureFilter.clause(.dns)
        if !text.trimmingCharacters(in: .whitespaces).isEmpty {
            do {
                parsed = .and(parsed, try CaptureFilter.parse(text))
            } catch {
                FileHandle.standardError.write(Data("busymate: invalid filter \"\(text)\": \(error)\n".utf8))
                throw ExitCode(64)
            }
        }
        filter.expression = parsed
        let records = try TrafficRepository(database: try StoreAccess.open(options.paths)).list(filter)
        if json {
            ExchangeJSON.write(ExchangeJSON.array(records.map { ExchangeJSON.object(DNSQueryJSON.members($0)) }))
            return
        }
        guard !records.isEmpty else {
            print("no DNS queries recorded (the forwarder runs in transparent mode: busymate mode transparent)")
            return
        }
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss"
        for r in records {
            let answers = r.responseBody.map { String(decoding: $0, as: UTF8.self).split(separator: "\n").joined(separator: ", ") } ?? ""
            let latency = r.durationMilliseconds.map { "\($0) ms" } ?? "-"
            print("\(time.string(from: r.startedAt))  \(DNSQueryJSON.clientIP(r.clientAddress) ?? "?")  \(r.host) \(r.path.dropFirst())  \(r.reason ?? r.error ?? "no answer")  \(latency)  \(answers)")
        }
    }
}

/// The devices list, from settings, the tunnel's status, the store and
/// the onboarding log.
enum DeviceRows {
    /// `counting`: read today's exchanges per device from the store (only
    /// a store the tunnel says is ok: one it is creating, or a full disk's,
    /// is left alone).
    static func read(_ paths: GroupPaths, counting: Bool = true) -> [DeviceRow] {
        let settings = SettingsFile.read(paths.settings).settings ?? AppSettings()
        let tunnel = TunnelStatus.read(paths.status)
        let today = Calendar.current.startOfDay(for: Date())
        let store = counting && tunnel?.store == "ok" ? try? StoreAccess.open(paths) : nil
        let counts = store.flatMap { try? TrafficRepository(database: $0).exchangesByDevice(since: today) } ?? [:]
        return DeviceRow.merge(settings: settings, seen: tunnel?.devices ?? [], onboarding: OnboardingLog.read(paths.onboarding), exchangesToday: counts)
    }

    static func table(_ rows: [DeviceRow]) -> String {
        let ago = { (date: Date?) -> String in
            guard let date else { return "never" }
            let seconds = Int(Date().timeIntervalSince(date))
            return seconds < 60 ? "\(seconds)s ago" : seconds < 3600 ? "\(seconds / 60)m ago" : "\(seconds / 3600)h ago"
        }
        var lines = ["NAME                 PORT   ADDRESS                  STATE    LAST SEEN   SOURCE       TODAY  CA"]
        for r in rows {
            let cols = [
                r.name.padding(toLength: 20, withPad: " ", startingAt: 0), (r.port.map(String.init) ?? "-").padding(toLength: 6, withPad: " ", startingAt: 0),
                (r.address ?? "-").padding(toLength: 24, withPad: " ", startingAt: 0), (r.online ? "online" : "offline").padding(toLength: 8, withPad: " ", startingAt: 0),
                ago(r.lastSeen).padding(toLength: 11, withPad: " ", startingAt: 0), (r.source ?? "-").padding(toLength: 12, withPad: " ", startingAt: 0),
                String(r.exchangesToday).padding(toLength: 6, withPad: " ", startingAt: 0), r.caTrustedAt != nil ? "trusted" : r.caDownloads > 0 ? "fetched" : "-",
            ]
            lines.append(cols.joined(separator: " "))
        }
        return lines.joined(separator: "\n")
    }

    /// Writes `devices.list`, keeping the rest of `devices`.
    static func setList(_ list: [AppSettings.NamedDevice], in root: inout JSONNode) {
        var devices = root["devices"] ?? JSONNode(.object([]))
        devices.set("list", JSONNode(.array(list.map { device in
            var members: [(key: String, node: JSONNode)] = [("name", JSONNode(.string(device.name)))]
            if let port = device.port { members.append(("port", JSONNode(.number(String(port))))) }
            if let address = device.address { members.append(("address", JSONNode(.string(address)))) }
            return JSONNode(.object(members))
        })))
        root.set("devices", devices)
    }
}
