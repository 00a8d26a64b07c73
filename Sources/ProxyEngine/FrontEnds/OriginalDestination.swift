import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// Where a redirected connection was going before nftables sent it here:
/// `SO_ORIGINAL_DST` (IPv4) or `IP6T_SO_ORIGINAL_DST` (IPv6) from
/// conntrack. nil when the connection was not redirected (a client that
/// dialled the transparent port itself).
enum OriginalDestination {
    /// linux/netfilter_ipv4.h and linux/netfilter_ipv6/ip6_tables.h: both 80.
    static let option: Int32 = 80

    /// Read on the channel's event loop (it completes there at once); nil
    /// when there is none.
    static func read(_ channel: Channel) -> EventLoopFuture<SocketAddress?> {
        guard let provider = channel as? SocketOptionProvider, let local = channel.localAddress else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let address: EventLoopFuture<SocketAddress>
        switch local {
        case .v6:
            let raw: EventLoopFuture<sockaddr_in6> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(IPPROTO_IPV6), name: SocketOptionName(option))
            address = raw.map { SocketAddress($0, host: "") }
        default:
            let raw: EventLoopFuture<sockaddr_in> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(IPPROTO_IP), name: SocketOptionName(option))
            address = raw.map { SocketAddress($0, host: "") }
        }
        return address.map { $0.port == 0 ? nil : $0 }.recover { _ in nil }
    }
}
