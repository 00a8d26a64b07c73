/// Where an enrolment link points: the onboarding listener, as a device
/// on the network reaches it.
public enum EnrolmentLink {
    /// `bound` is the listener's address (`host:port`, `[v6]:port`); a
    /// wildcard is named by this machine's first address of its family
    /// that a device could reach (`interfaces`, read by the caller:
    /// reading them blocks). `loopbackOnly`: no device can open it.
    public static func authority(bound: ListenAddress, interfaces: [String]) -> (authority: String, loopbackOnly: Bool) {
        var host = IPAddressText.canonical(bound.host)
        if host == "0.0.0.0" || host == "::" {
            let v6 = host == "::"
            let reachable = interfaces.map(IPAddressText.canonical).filter { address in
                address.contains(":") == v6 && !IPNetwork.isLoopback(address) && !address.lowercased().hasPrefix("fe80:")
            }
            host = reachable.first ?? (v6 ? "::1" : "127.0.0.1")
        }
        let loopbackOnly = IPNetwork.isLoopback(host)
        return (host.contains(":") ? "[\(host)]:\(bound.port)" : "\(host):\(bound.port)", loopbackOnly)
    }

    public static func url(authority: String, token: String) -> String { "http://\(authority)/enrol/\(token)" }
}
