import Foundation

public struct TrafficCounters: Codable, Sendable, Equatable {
    public var connectionsTotal = 0
    public var connectionsActive = 0
    public var requestsTotal = 0
    public var bytesFromClients = 0
    public var bytesToClients = 0
    public var requestsPerSecond = 0.0
    /// Messages held at breakpoints now (nil from a tunnel that predates them).
    public var breakpointsHeld: Int?
    /// Passed-through tunnels closed by `timeouts.tunnel_idle_seconds` (nil from an older tunnel).
    public var tunnelsIdleClosed: Int?
    public init() {}
}

public struct ListenerStatus: Codable, Sendable, Equatable {
    /// As written in `proxy.listen`.
    public var address: String
    /// What the socket is bound to (differs for port 0).
    public var bound: String?
    public var error: String?
    /// An open proxy: a listener that is not on loopback.
    public var warning: String?
    public init(address: String, bound: String?, error: String?, warning: String? = nil) {
        self.address = address
        self.bound = bound
        self.error = error
        self.warning = warning
    }
}

/// What the tunnel publishes in `status.json` (atomically rewritten).
public struct TunnelStatus: Codable, Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    /// "dropped to busymate:busymate" or "unprivileged (not started as root)".
    public var privileges: String
    public var state: TunnelState
    public var mode: String
    public var startedAt: Date
    public var updatedAt: Date
    public var settingsSha256: String
    public var settingsError: String?
    public var listeners: [ListenerStatus]
    public var counters: TrafficCounters
    public var supervisorAttached: Bool
    public var lastError: String?
    /// "on", or "off: <why>" when HTTPS cannot be intercepted (no usable CA).
    public var interception: String?
    /// "ok", or what is wrong with the capture store (cannot be opened, a
    /// full disk); nil from a tunnel that predates it.
    public var store: String?
    /// Devices seen, and what traffic says of the network (nil: an older tunnel).
    public var devices: [DevicePresence]?
    public var network: NetworkPresence?
    /// The cloud sinks (nil: not paired, or an older tunnel).
    public var cloud: [CloudSinkStatus]?

    public init(
        pid: Int32, uid: UInt32, gid: UInt32, privileges: String, state: TunnelState, mode: String, startedAt: Date,
        updatedAt: Date, settingsSha256: String, settingsError: String?, listeners: [ListenerStatus],
        counters: TrafficCounters, supervisorAttached: Bool, lastError: String?, interception: String? = nil, store: String? = nil
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.privileges = privileges
        self.state = state
        self.mode = mode
        self.startedAt = startedAt
        self.updatedAt = updatedAt
        self.settingsSha256 = settingsSha256
        self.settingsError = settingsError
        self.listeners = listeners
        self.counters = counters
        self.supervisorAttached = supervisorAttached
        self.lastError = lastError
        self.interception = interception
        self.store = store
    }

    /// The supervisor reads this as root, and the tunnel (another user)
    /// writes it: no symlink is followed, and a file past 1 MiB is no status.
    public static func read(_ url: URL) -> TunnelStatus? {
        guard let data = try? GroupFileReader.read(url, limit: 1 << 20) else { return nil }
        return try? StatusCoding.decoder.decode(TunnelStatus.self, from: data)
    }
}

public enum StatusCoding {
    public static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.keyEncodingStrategy = .convertToSnakeCase
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return e
    }

    public static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.keyDecodingStrategy = .convertFromSnakeCase
        d.dateDecodingStrategy = .iso8601
        return d
    }
}
