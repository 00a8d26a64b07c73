import Foundation

/// The network part of the readiness card: the mode as configured and as
/// traffic shows it, the transparent rules, and what was refused.
public struct NetworkStatus: Codable, Sendable, Equatable {
    public var mode: String
    /// Reconciled as seed 004 reconciles VPN and PAC (`NetworkPresence.liveMode`).
    public var liveMode: String
    /// `installed`, `off`, or `error: …` (the nftables table).
    public var rules: String
    public var quicRejected: Int
    /// Clients refused at accept (outside `access.allow`).
    public var refused: Int
    public var dnsQueries: Int
    /// Both a proxy client and transparent traffic were seen in the idle window.
    public var bothSeen: Bool
    /// `devices.idle_seconds`: how long a device stays online after its last traffic.
    public var idleSeconds: Double
    public var warnings: [String]
    /// The nftables table of this appliance (`inet <table>`), named after its group directory.
    public var table: String?

    public init(
        mode: String, liveMode: String, rules: String, quicRejected: Int, refused: Int, dnsQueries: Int, bothSeen: Bool,
        idleSeconds: Double,
        warnings: [String], table: String? = nil
    ) {
        self.table = table
        self.idleSeconds = idleSeconds
        self.mode = mode
        self.liveMode = liveMode
        self.rules = rules
        self.quicRejected = quicRejected
        self.refused = refused
        self.dnsQueries = dnsQueries
        self.bothSeen = bothSeen
        self.warnings = warnings
    }
}

/// One row of `busymate devices`: a named device or a client seen, with
/// its readiness (seed 004's card, per device).
public struct DeviceRow: Codable, Sendable, Equatable {
    public var name: String
    public var port: Int?
    public var address: String?
    public var online: Bool
    public var lastSeen: Date?
    /// `proxy`, `transparent` or `port`; nil until it sent traffic.
    public var source: String?
    public var exchangesToday: Int
    /// The CA fetched from the onboarding listener by its address.
    public var caDownloads: Int
    /// It completed an intercepted handshake (the tunnel saw it trust the CA), since the tunnel started.
    public var caTrustedAt: Date?
    public var named: Bool
    /// Its enrolment link: `link not opened yet`, `enrolled from ADDRESS`, `link expired`, `revoked` (nil: none).
    public var enrolment: String?
    public var enrolledAt: Date?
    /// Until when a grant admits its address (an enrolled device's is renewed while it sends traffic).
    public var admittedUntil: Date?
    /// Its PAC fetched from the onboarding listener by its address.
    public var pacFetches: Int = 0

    enum CodingKeys: String, CodingKey {
        case name, port, address, online, lastSeen, source, exchangesToday, caDownloads, caTrustedAt, named, enrolment, enrolledAt,
            admittedUntil, pacFetches
    }

    public init(
        name: String, port: Int?, address: String?, online: Bool, lastSeen: Date?, source: String?, exchangesToday: Int, caDownloads: Int,
        caTrustedAt: Date? = nil, named: Bool
    ) {
        self.caTrustedAt = caTrustedAt
        self.name = name
        self.port = port
        self.address = address
        self.online = online
        self.lastSeen = lastSeen
        self.source = source
        self.exchangesToday = exchangesToday
        self.caDownloads = caDownloads
        self.named = named
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(port, forKey: .port)
        try c.encode(address, forKey: .address)
        try c.encode(online, forKey: .online)
        try c.encode(lastSeen, forKey: .lastSeen)
        try c.encode(source, forKey: .source)
        try c.encode(exchangesToday, forKey: .exchangesToday)
        try c.encode(caDownloads, forKey: .caDownloads)
        try c.encode(caTrustedAt, forKey: .caTrustedAt)
        try c.encode(named, forKey: .named)
        try c.encode(enrolment, forKey: .enrolment)
        try c.encode(enrolledAt, forKey: .enrolledAt)
        try c.encode(admittedUntil, forKey: .admittedUntil)
        try c.encode(pacFetches, forKey: .pacFetches)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        port = try c.decodeIfPresent(Int.self, forKey: .port)
        address = try c.decodeIfPresent(String.self, forKey: .address)
        online = try c.decode(Bool.self, forKey: .online)
        lastSeen = try c.decodeIfPresent(Date.self, forKey: .lastSeen)
        source = try c.decodeIfPresent(String.self, forKey: .source)
        exchangesToday = try c.decodeIfPresent(Int.self, forKey: .exchangesToday) ?? 0
        caDownloads = try c.decodeIfPresent(Int.self, forKey: .caDownloads) ?? 0
        caTrustedAt = try c.decodeIfPresent(Date.self, forKey: .caTrustedAt)
        named = try c.decodeIfPresent(Bool.self, forKey: .named) ?? false
        enrolment = try c.decodeIfPresent(String.self, forKey: .enrolment)
        enrolledAt = try c.decodeIfPresent(Date.self, forKey: .enrolledAt)
        admittedUntil = try c.decodeIfPresent(Date.self, forKey: .admittedUntil)
        pacFetches = try c.decodeIfPresent(Int.self, forKey: .pacFetches) ?? 0
    }

    /// The named devices, then every other client the tunnel saw.
    public static func merge(
        settings: AppSettings, seen: [DevicePresence], onboarding: OnboardingLog?, exchangesToday: [String: Int], now: Date = Date()
    ) -> [DeviceRow] {
        var rows: [DeviceRow] = []
        let byName = Dictionary(seen.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        for device in settings.devices.list {
            let presence = byName[device.name]
            let address = device.address ?? presence?.address
            var row = DeviceRow(
                name: device.name, port: device.port, address: address, online: presence?.online ?? false,
                lastSeen: presence?.lastSeen, source: presence?.source, exchangesToday: exchangesToday[device.name] ?? 0,
                caDownloads: address.map { onboarding?.caDownloads(by: $0) ?? 0 } ?? 0, caTrustedAt: presence?.caTrustedAt, named: true)
            row.enrolment = device.enrolment?.state(now: now)
            row.enrolledAt = device.enrolment?.redeemedAt
            row.pacFetches = address.map { onboarding?.clients[$0]?.pacFetches ?? 0 } ?? 0
            row.admittedUntil = address.flatMap { settings.access.grantedUntil($0, now: now) }
            rows.append(row)
        }
        let named = Set(settings.devices.list.map(\.name))
        // A client seen by its address before it was named is the named device now.
        let claimed = Set(settings.devices.list.compactMap(\.address))
        var listed = Set(rows.compactMap(\.address))
        for presence in seen where !named.contains(presence.name) && !claimed.contains(presence.name) {
            listed.insert(presence.address ?? presence.name)
            rows.append(
                DeviceRow(
                    name: presence.name, port: nil, address: presence.address, online: presence.online, lastSeen: presence.lastSeen,
                    source: presence.source, exchangesToday: exchangesToday[presence.name] ?? 0,
                    caDownloads: presence.address.map { onboarding?.caDownloads(by: $0) ?? 0 } ?? 0, caTrustedAt: presence.caTrustedAt,
                    named: false))
            rows[rows.count - 1].pacFetches = presence.address.map { onboarding?.clients[$0]?.pacFetches ?? 0 } ?? 0
            rows[rows.count - 1].admittedUntil = presence.address.flatMap { settings.access.grantedUntil($0, now: now) }
        }
        // A device that fetched the CA but sent no traffic yet.
        for (client, entry) in (onboarding?.clients ?? [:]).sorted(by: { $0.key < $1.key })
        where !listed.contains(client) && entry.caDownloads > 0 {
            rows.append(
                DeviceRow(
                    name: client, port: nil, address: client, online: false, lastSeen: nil, source: nil, exchangesToday: 0,
                    caDownloads: entry.caDownloads, named: false))
        }
        return rows
    }
}

/// What the onboarding listener served, per client address
/// (`onboarding.json`, written by the web front).
public struct OnboardingLog: Codable, Sendable, Equatable {
    public struct Client: Codable, Sendable, Equatable {
        public var caDownloads: Int
        public var pacFetches: Int
        public var lastAt: Date?
        public init(caDownloads: Int = 0, pacFetches: Int = 0, lastAt: Date? = nil) {
            self.caDownloads = caDownloads
            self.pacFetches = pacFetches
            self.lastAt = lastAt
        }
    }

    public var clients: [String: Client]
    public init(clients: [String: Client] = [:]) { self.clients = clients }

    public func caDownloads(by address: String) -> Int { clients[address]?.caDownloads ?? 0 }

    public static func read(_ url: URL) -> OnboardingLog? {
        guard let data = try? GroupFileReader.read(url, limit: 4 << 20) else { return nil }
        return try? StatusCoding.decoder.decode(OnboardingLog.self, from: data)
    }
}
