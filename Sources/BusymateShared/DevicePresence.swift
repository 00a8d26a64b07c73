import Foundation

/// One device as the tunnel sees it (in `status.json`).
public struct DevicePresence: Codable, Sendable, Equatable {
    public var name: String
    public var address: String?
    public var port: Int?
    /// `proxy`, `transparent` or `port`: what keeps it lit (transparent
    /// traffic outranks the proxy's, as the seed's VPN outranks PAC).
    public var source: String?
    public var online: Bool
    public var lastSeen: Date?
    /// When its address first completed an intercepted handshake (it trusts the CA).
    public var caTrustedAt: Date?

    public init(name: String, address: String?, port: Int?, source: String?, online: Bool, lastSeen: Date?, caTrustedAt: Date? = nil) {
        self.caTrustedAt = caTrustedAt
        self.name = name
        self.address = address
        self.port = port
        self.source = source
        self.online = online
        self.lastSeen = lastSeen
    }
}

/// What the tunnel's traffic says of the network (in `status.json`).
public struct NetworkPresence: Codable, Sendable, Equatable {
    /// Clients refused at accept (outside `access.allow`).
    public var refused: Int
    /// Traffic arrived through the transparent redirect, or the proxy
    /// (a proxy setting, a PAC file, a device port), within the idle window.
    public var transparentTraffic: Bool
    public var proxyTraffic: Bool
    /// DNS queries forwarded.
    public var dnsQueries: Int

    public init(refused: Int = 0, transparentTraffic: Bool = false, proxyTraffic: Bool = false, dnsQueries: Int = 0) {
        self.refused = refused
        self.transparentTraffic = transparentTraffic
        self.proxyTraffic = proxyTraffic
        self.dnsQueries = dnsQueries
    }

    /// The live mode, reconciled as seed 004 reconciles VPN and PAC:
    /// transparent traffic wins; proxy traffic alone says proxy; no traffic
    /// says what is configured.
    public func liveMode(configured: String) -> String {
        if transparentTraffic { return "transparent" }
        if proxyTraffic { return "proxy" }
        return configured
    }
}
