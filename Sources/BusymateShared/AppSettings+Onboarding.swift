/// Which proxy listener a device that found this machine can use, and
/// when none can: a PAC that answered DIRECT there would route the device
/// around the proxy with nothing said (seed 004's pitfall), so none is served.
extension AppSettings {
    /// The listener on `host`, the address a device reached, else a
    /// wildcard one of its family. Nil: none serves that address.
    public func proxyListener(serving host: String) -> ListenAddress? {
        if let exact = listen.first(where: { $0.host == host }) { return exact }
        let wildcard = host.contains(":") ? "::" : "0.0.0.0"
        return listen.first { $0.host == wildcard }
    }

    /// Why a device reaching `host` gets no PAC, and what fixes it.
    public func noProxyListener(at host: String) -> String {
        let shown = host.contains(":") ? "[\(host)]" : host
        let port = listen.first?.port ?? 9090
        return "no proxy listener is on \(shown), the address this device reached (proxy.listen: \(listen.map(\.description).joined(separator: ", "))). "
            + "A PAC answering DIRECT would send its traffic around Busymate, so none is served: add \"\(shown):\(port)\" "
            + "(or \"\(host.contains(":") ? "[::]" : "0.0.0.0"):\(port)\") to proxy.listen in settings.json"
    }

    /// Said by `status` when the onboarding listener serves devices that no
    /// proxy listener can: its own address has none, or (bound on every
    /// address) all of them are on loopback.
    public var onboardingWarning: String? {
        guard let onboarding = onboardingListen else { return nil }
        let listeners = listen.map(\.description).joined(separator: ", ")
        if onboarding.isWildcard {
            guard listen.allSatisfy(\.isLoopback) else { return nil }
            return "the onboarding listener (\(onboarding)) is refused a PAC for every device: all proxy listeners are on loopback (\(listeners)); "
                + "add this machine's address, or \"0.0.0.0:\(listen.first?.port ?? 9090)\", to proxy.listen"
        }
        guard proxyListener(serving: onboarding.host) == nil else { return nil }
        return "devices that open the onboarding listener (\(onboarding)) are refused a PAC: " + noProxyListener(at: onboarding.host)
    }
}
