import NIOCore

/// SOCKS5 on the explicit proxy's and the device ports' listeners.
extension ProxyPipeline {
    /// The store's `front_end` for a connection that came in by SOCKS5.
    static let socksFrontEnd = "socks5"

    /// The first byte said SOCKS5: the HTTP layer goes and the handshake
    /// takes its place; the sniffer hands it the bytes as it leaves.
    func startSOCKS(replacing sniffer: some RemovableChannelHandler) throws {
        setFrontEnd(Self.socksFrontEnd)
        try ops.addHandler(SOCKS5Handshake(owner: self), position: .after(sniffer))
        removeHTTP(keepingEncoder: false)
        ops.removeHandler(sniffer, promise: nil)
    }

    /// The SOCKS5 target is dialled and answered: the router peeks at the
    /// client's first bytes, as on a transparent connection, with `peer`
    /// open for a pass-through. HTTP and intercepted requests go to the
    /// address the target was dialled at (its name still in Host and SNI),
    /// as a transparent connection's go to its original destination.
    func socksEstablished(
        _ target: ProxyTarget, peer: Channel, tunnel: UpstreamDial.Tunnel, rule: String?,
        replacing handshake: some RemovableChannelHandler
    ) throws {
        let carried = services.interception.upstreamProxy(for: target.host) != nil
        let pinned = carried || rule != nil ? nil : peer.remoteAddress?.ipAddress.map(DeviceRegistry.normalized)
        let router = ConnectionRouter(owner: self, entry: .socks(target, pinned: pinned, peer: peer, tunnel: tunnel, rule: rule))
        try ops.addHandler(router, position: .after(handshake))
        ops.removeHandler(handshake, promise: nil)
    }
}
