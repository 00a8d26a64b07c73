/// Which proxy listener a device that found this machine can use, and
/// when none can: a PAC that answered DIRECT there would route the device
/// around the proxy with nothing said (seed 004's pitfall), so none is served.
extension AppSettings {
    /// The listener on `host`, the address a device reached, else a
    /// wildcard one of its family (IPv6 sockets are v6-only here). Nil:
    /// none serves that address.
    public func proxyListener(serving host: String) -> ListenAddress? {
        let reached = IPAddressText.canonical(host)
        if let exact = listen.first(where: { IPAddressText.canonical($0.host) == reached }) { return exact }
        let wildcard = Self.wildcard(of: reached)
        return listen.first { IPAddressText.canonical($0.host) == wildcard }
    }

    /// Whether device ports (bound on `devices.host`) serve a device that
    /// reached `host`.
    public func devicePortsServe(_ host: String) -> Bool {
        let reached = IPAddressText.canonical(host), bound = IPAddressText.canonical(devices.host)
        return bound == reached || bound == Self.wildcard(of: reached)
    }

    static func wildcard(of host: String) -> String { host.contains(":") ? "::" : "0.0.0.0" }

    /// What `status` and the log say when a device reaching `host` gets no
    /// PAC, and what fixes it (devices themselves are told less).
    public func noProxyListener(at host: String) -> String {
        let shown = host.contains(":") ? "[\(host)]" : host
        let port = listen.first?.port ?? 9090
        let wildcard = host.contains(":") ? "[::]" : "0.0.0.0"
        return "no proxy listener is on \(shown) (proxy.listen: \(listen.map(\.description).joined(separator: ", "))): "
            + "add \"\(shown):\(port)\" (or \"\(wildcard):\(port)\") to proxy.listen in settings.json"
    }

    /// Said by `status` when the onboarding listener serves devices that no
    /// proxy listener can: its own address has none, or (bound on every
    /// address of its family) all of that family's are on loopback. In
    /// transparent mode devices need no PAC: nothing to say.
    public var onboardingWarning: String? {
        guard mode != .transparent, let onboarding = onboardingListen else { return nil }
        let host = IPAddressText.canonical(onboarding.host)
        if host == Self.wildcard(of: host) {
            let v6 = host.contains(":")
            guard !listen.contains(where: { $0.host.contains(":") == v6 && !$0.isLoopback }) else { return nil }
            let wildcard = v6 ? "[::]" : "0.0.0.0"
            return
                "devices that open the onboarding listener (\(onboarding)) are refused a PAC: no proxy listener of its family is off loopback "
                + "(proxy.listen: \(listen.map(\.description).joined(separator: ", "))); add this machine's address, or \"\(wildcard):\(listen.first?.port ?? 9090)\", to proxy.listen"
        }
        guard proxyListener(serving: host) == nil else { return nil }
        return "devices that open the onboarding listener (\(onboarding)) are refused a PAC: " + noProxyListener(at: host)
    }
}
