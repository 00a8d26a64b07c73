import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// `busymate mode [proxy|transparent]`: the capture mode, applied live.
struct Mode: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show or set the capture mode: proxy (clients set a proxy or a PAC URL) or transparent (nftables redirects traffic; the gateway).",
        discussion: "Setting it writes settings.json and waits (up to 10 s) until the supervisor has applied it.")

    @OptionGroup var options: GroupOption
    @Argument(help: "proxy or transparent") var mode: String?

    func run() async throws {
        let paths = options.paths
        guard let mode else {
            let report = try ControlClient.request(ControlMessage(.status), paths: paths).report
            guard let network = report?.network else { throw CLIError(description: "the supervisor gave no network status") }
            print(
                "mode \(network.mode) · live \(network.liveMode)\(network.bothSeen ? " (proxy clients too)" : "") · rules \(network.rules)")
            return
        }
        guard let wanted = AppSettings.Mode(rawValue: mode) else {
            throw ValidationError("\"\(mode)\" is not a mode: use proxy or transparent")
        }
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
                if network.rules.hasPrefix("error") {
                    throw CLIError(description: "mode \(wanted.rawValue), but the rules failed: \(network.rules)")
                }
                if wanted == .proxy ? network.rules == "off" : network.rules == "installed" {
                    print("mode \(wanted.rawValue) · rules \(network.rules)")
                    return
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CLIError(
            description: "mode \(wanted.rawValue) written, not applied within 10 s (rules \(last?.rules ?? "?")); see busymate status")
    }
}

/// `busymate devices`: named devices (a port from the pool, or an address)
/// and every client seen, with presence.
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List devices: named ones (their own port or address) and every client seen, online or not.",
        subcommands: [ListDevices.self, Show.self, Add.self, Link.self, Revoke.self, Remove.self], defaultSubcommand: ListDevices.self)

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
            abstract:
                "Name a device: it gets a port from devices.port_pool (or is known by --address), and an enrolment link to open on it. Idempotent; prints the port.",
            discussion: """
                The link (and its QR code) is for one device: opened on it, its address is admitted (renewed while it sends \
                traffic), bound to the name, and offered its own PAC, the CA and its setup steps. Only a digest of the link is kept: \
                it is printed once (busymate devices link NAME prints a new one).
                """)
        @OptionGroup var options: GroupOption
        @Argument var name: String
        @Option(help: "Name the device by this address instead of giving it a port.") var address: String?
        @Option(help: "How long the enrolment link can be opened: 30m, 24h, 7d.") var linkTtl = "24h"
        @Flag(help: "No enrolment link.") var noLink = false
        @Option(help: "The address or host name devices reach this machine by, for the link (default: the onboarding listener's).")
        var host: String?
        @Flag(help: "Print a JSON object: name, port, link, expires.") var json = false

        func run() async throws {
            guard AppSettings.NamedDevice.isValidName(name) else {
                throw ValidationError("\"\(name)\" is not a device name (letters, digits, - _ .; at most 64)")
            }
            if let address, !IPAddressText.isLiteral(address) { throw ValidationError("\"\(address)\" is not an IP address") }
            let lifetime = try EnrolmentIssue.lifetime(linkTtl, option: "--link-ttl")
            let paths = options.paths
            let before = try SettingsEdit.current(paths).settings
            if let existing = before.devices.named(name), address == nil || existing.address == address {
                return report(
                    existing, issued: nil, authority: nil,
                    note:
                        "\(name) is already added (\(existing.enrolment?.state() ?? "no enrolment link")); busymate devices link \(name) prints a new link"
                )
            }
            // Where the link points, decided before the device is written: without a listener it is added with no link.
            var authority: (authority: String, loopbackOnly: Bool)?
            var note: String?
            if !noLink {
                do {
                    authority = try EnrolmentIssue.authority(paths, host: host)
                } catch {
                    note = "no enrolment link: \(error)"
                }
            }
            var added: AppSettings.NamedDevice?
            var already = false
            var issued: EnrolmentIssue.Issued?
            try SettingsEdit.apply(paths) { root in
                // Again under the file's lock: another `add` may have just named it.
                let (device, existed) = try DeviceList.add(name, address: address, in: &root)
                added = device
                already = existed
                if !existed, authority != nil {
                    let link = try DeviceList.issueLink(name, lifetime: lifetime, in: &root)
                    issued = EnrolmentIssue.Issued(name: name, token: link.token, expires: link.expires, ended: link.ended)
                }
            }
            guard let added else { return }
            // Named meanwhile by another `add`: no link was issued.
            report(
                added, issued: issued, authority: authority,
                note: already ? "\(name) is already added; busymate devices link \(name) prints a new link" : note)
        }

        private func report(
            _ device: AppSettings.NamedDevice, issued: EnrolmentIssue.Issued?, authority: (authority: String, loopbackOnly: Bool)?,
            note: String?
        ) {
            if json {
                var node =
                    issued.flatMap { i in authority.map { EnrolmentIssue.json(i, port: device.port, authority: $0) } }
                    ?? ExchangeJSON.object([
                        ("name", ExchangeJSON.string(device.name)), ("port", ExchangeJSON.number(device.port)),
                        ("link", ExchangeJSON.string(nil)),
                    ])
                if let address = device.address { node.set("address", ExchangeJSON.string(address)) }
                if let note { node.set("note", ExchangeJSON.string(note)) }
                ExchangeJSON.write(node)
                return
            }
            print(device.port.map(String.init) ?? device.address ?? "")
            if let issued, let authority { print(EnrolmentIssue.text(issued, authority: authority)) }
            if let note { print(note) }
        }
    }

    struct Link: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new enrolment link (and QR code) for a named device; its previous link stops working.")
        @OptionGroup var options: GroupOption
        @Argument var name: String
        @Option(help: "How long it can be opened: 30m, 24h, 7d.") var ttl = "24h"
        @Option(help: "The address or host name devices reach this machine by (default: the onboarding listener's).") var host: String?
        @Flag(help: "Print a JSON object: name, port, link, expires.") var json = false

        func run() async throws {
            let lifetime = try EnrolmentIssue.lifetime(ttl, option: "--ttl")
            let paths = options.paths
            let authority = try EnrolmentIssue.authority(paths, host: host)
            var issued: EnrolmentIssue.Issued?
            var port: Int?
            try SettingsEdit.apply(paths) { root in
                let link = try DeviceList.issueLink(name, lifetime: lifetime, in: &root)
                issued = EnrolmentIssue.Issued(name: name, token: link.token, expires: link.expires, ended: link.ended)
                port = try AppSettings.decode(root).settings.devices.named(name)?.port
            }
            guard let issued else { return }
            if json {
                ExchangeJSON.write(EnrolmentIssue.json(issued, port: port, authority: authority))
            } else {
                print(EnrolmentIssue.text(issued, authority: authority))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Withdraw a device's enrolment link: it is refused from then on, and the admission it gave ends (its grant is removed).")
        @OptionGroup var options: GroupOption
        @Argument var name: String

        func run() async throws {
            var ended: String?
            try SettingsEdit.apply(options.paths) { root in ended = try DeviceList.revoke(name, in: &root) }
            print("revoked \(name)'s enrolment link\(ended.map { "; \($0) is no longer admitted by it" } ?? "")")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget a named device (its port closes).")
        @OptionGroup var options: GroupOption
        @Argument var name: String

        func run() async throws {
            let paths = options.paths
            var ended: String?
            try SettingsEdit.apply(paths) { root in ended = try DeviceList.remove(name, in: &root) }
            print("removed \(name)\(ended.map { "; the admission its enrolment link gave \($0) ended" } ?? "")")
        }
    }
}

/// `busymate allow`: the seed's IP whitelist, with a time to live.
struct Allow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Let an address use the listeners that are not on loopback for a while (access.grants), list or remove grants.",
        discussion:
            "access.allow (CIDRs, in settings.json) is for networks; this is for one device for a time. Expired grants are swept on each change."
    )

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
                ExchangeJSON.write(
                    ExchangeJSON.array(
                        grants.map {
                            ExchangeJSON.object([("address", ExchangeJSON.string($0.address)), ("until", ExchangeJSON.date($0.until))])
                        }))
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
            if remove {
                guard settings.access.grants.contains(where: { $0.address == address }) else {
                    throw CLIError(description: "\(address) has no grant")
                }
                DeviceList.editGrants(in: &root, now: Date()) { items in
                    items = items.filter { if case let .string(a)? = $0["address"]?.value { return a != address } else { return true } }
                }
            } else {
                DeviceList.putGrant(address, until: until, in: &root)
            }
        }
        print(remove ? "removed the grant for \(address)" : "allowed \(address) until \(ISO8601DateFormatter().string(from: until))")
    }
}

/// `busymate dns [FILTER]`: the queries the forwarder answered.
struct DNS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dns",
        abstract:
            "List DNS queries the forwarder answered (transparent mode), newest first; a filter narrows them (e.g. '~d example.com', '~device phone')."
    )

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
            print(
                "\(time.string(from: r.startedAt))  \(DNSQueryJSON.clientIP(r.clientAddress) ?? "?")  \(r.host) \(r.path.dropFirst())  \(r.reason ?? r.error ?? "no answer")  \(latency)  \(answers)"
            )
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
        return DeviceRow.merge(
            settings: settings, seen: tunnel?.devices ?? [], onboarding: OnboardingLog.read(paths.onboarding), exchangesToday: counts)
    }

    static func table(_ rows: [DeviceRow]) -> String {
        let ago = { (date: Date?) -> String in
            guard let date else { return "never" }
            let seconds = Int(Date().timeIntervalSince(date))
            return seconds < 60 ? "\(seconds)s ago" : seconds < 3600 ? "\(seconds / 60)m ago" : "\(seconds / 3600)h ago"
        }
        var lines = ["NAME                 PORT   ADDRESS                  STATE    LAST SEEN   SOURCE       TODAY  CA       ENROLMENT"]
        for r in rows {
            let cols = [
                r.name.padding(toLength: 20, withPad: " ", startingAt: 0),
                (r.port.map(String.init) ?? "-").padding(toLength: 6, withPad: " ", startingAt: 0),
                (r.address ?? "-").padding(toLength: 24, withPad: " ", startingAt: 0),
                (r.online ? "online" : "offline").padding(toLength: 8, withPad: " ", startingAt: 0),
                ago(r.lastSeen).padding(toLength: 11, withPad: " ", startingAt: 0),
                (r.source ?? "-").padding(toLength: 12, withPad: " ", startingAt: 0),
                String(r.exchangesToday).padding(toLength: 6, withPad: " ", startingAt: 0),
                (r.caTrustedAt != nil ? "trusted" : r.caDownloads > 0 ? "fetched" : "-").padding(toLength: 8, withPad: " ", startingAt: 0),
                r.enrolment.map { $0.hasPrefix("enrolled") ? "enrolled" : $0 == "link not opened yet" ? "link open" : $0 } ?? "-",
            ]
            lines.append(cols.joined(separator: " "))
        }
        return lines.joined(separator: "\n")
    }
}
