/// What a listening socket the supervisor binds is for. Its name carries
/// the role to the tunnel (in `BUSYMATE_LISTEN_NAMES` and the `listeners`
/// message): `host:port` is the explicit proxy (as before roles existed),
/// the others are `role@host:port`.
public enum ListenerRole: Sendable, Hashable {
    /// `proxy.listen`
    case proxy
    /// The nftables rules' TCP redirect target (`transparent.port`).
    case transparent
    /// A named device's port from `devices.port_pool`.
    case device(String)
    /// The DNS forwarder (`dns.port`), over UDP and over TCP.
    case dnsUDP
    case dnsTCP

    public var isDatagram: Bool { self == .dnsUDP }

    /// The transparent listener and the DNS forwarder: the redirect needs them.
    public var isRedirectTarget: Bool { self == .transparent || self == .dnsUDP || self == .dnsTCP }

    /// Whether this machine has IPv6 at all (no `[::]` listeners otherwise).
    public static let hasIPv6: Bool = {
        guard let text = try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8) else { return false }
        return !text.isEmpty
    }()

    /// The socket's name for `address`.
    public func name(_ address: ListenAddress) -> String {
        switch self {
        case .proxy: return address.description
        case .transparent: return "transparent@\(address)"
        case let .device(device): return "device:\(device)@\(address)"
        case .dnsUDP: return "dns-udp@\(address)"
        case .dnsTCP: return "dns-tcp@\(address)"
        }
    }

    /// The role and address a socket's name gives.
    public static func parse(_ name: String) -> (role: ListenerRole, address: String)? {
        guard let at = name.firstIndex(of: "@") else { return (.proxy, name) }
        let prefix = name[..<at]
        let address = String(name[name.index(after: at)...])
        switch prefix {
        case "transparent": return (.transparent, address)
        case "dns-udp": return (.dnsUDP, address)
        case "dns-tcp": return (.dnsTCP, address)
        default:
            guard prefix.hasPrefix("device:") else { return nil }
            let device = String(prefix.dropFirst("device:".count))
            guard AppSettings.NamedDevice.isValidName(device) else { return nil }
            return (.device(device), address)
        }
    }
}

/// One socket the supervisor wants bound.
public struct WantedListener: Sendable, Hashable {
    public var role: ListenerRole
    public var address: ListenAddress
    public var name: String { role.name(address) }

    public init(_ role: ListenerRole, _ address: ListenAddress) {
        self.role = role
        self.address = address
    }
}

extension AppSettings {
    /// Every socket these settings want: the proxy's, the transparent
    /// listener and the DNS forwarder in transparent mode (IPv4 and IPv6),
    /// and each named device's port.
    public var wantedListeners: [WantedListener] {
        var out = listen.map { WantedListener(.proxy, $0) }
        if mode == .transparent {
            for host in ["0.0.0.0"] + (ListenerRole.hasIPv6 ? ["::"] : []) {
                out.append(WantedListener(.transparent, ListenAddress(host: host, port: transparent.port)))
                out.append(WantedListener(.dnsUDP, ListenAddress(host: host, port: dns.port)))
                out.append(WantedListener(.dnsTCP, ListenAddress(host: host, port: dns.port)))
            }
        }
        for device in devices.list {
            if let port = device.port { out.append(WantedListener(.device(device.name), ListenAddress(host: devices.host, port: port))) }
        }
        return out
    }
}
