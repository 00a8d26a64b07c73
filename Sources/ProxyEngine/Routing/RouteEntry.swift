import NIOCore
import NIOHTTP1

/// How a connection reached the router, and so where its target comes
/// from and who answers the client.
enum RouteEntry {
    /// An explicit `CONNECT host:port` whose request has ended: the host
    /// decides (intercept or pass through) before any byte of the tunnel,
    /// and the router answers `200 Connection Established` or an error.
    case connect(HTTPRequestHead, ProxyTarget)
    /// A redirected connection (the transparent front end): conntrack's
    /// original destination, an address every dial is pinned to; the first
    /// bytes name the host (SNI, Host, else what the client's DNS said).
    case redirected(ProxyTarget)
    /// A SOCKS5 connection whose target is dialled and answered: `peer` is
    /// open for a pass-through, dials are pinned to `pinned` (nil: by name),
    /// and `rule` is the host_override its dial followed. Then as redirected.
    case socks(ProxyTarget, pinned: String?, peer: Channel, tunnel: UpstreamDial.Tunnel, rule: String?)
}
