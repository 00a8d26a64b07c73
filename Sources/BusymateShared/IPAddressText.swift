#if canImport(Glibc)
    import Glibc
#endif

/// IP literal checks done by the C library, the same parser the kernel's
/// callers use.
public enum IPAddressText {
    public static func isIPv4(_ text: String) -> Bool {
        var addr = in_addr()
        return inet_pton(AF_INET, text, &addr) == 1
    }

    public static func isIPv6(_ text: String) -> Bool {
        var addr = in6_addr()
        return inet_pton(AF_INET6, text, &addr) == 1
    }

    public static func isLiteral(_ text: String) -> Bool { isIPv4(text) || isIPv6(text) }

    /// The address as sockets report it (`FD00:0::1` is `fd00::1`, `::0`
    /// is `::`); text that is no address comes back as it is.
    public static func canonical(_ text: String) -> String {
        var v4 = in_addr()
        var v6 = in6_addr()
        var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        if inet_pton(AF_INET, text, &v4) == 1, inet_ntop(AF_INET, &v4, &out, socklen_t(out.count)) != nil { return String(cString: out) }
        if inet_pton(AF_INET6, text, &v6) == 1, inet_ntop(AF_INET6, &v6, &out, socklen_t(out.count)) != nil { return String(cString: out) }
        return text
    }

    /// One host however it is written: canonical, and an IPv4-mapped IPv6
    /// address (a v4 client of a dual-stack socket) as its IPv4 address.
    public static func host(_ text: String) -> String {
        let c = canonical(text)
        return c.hasPrefix("::ffff:") && c.contains(".") ? String(c.dropFirst(7)) : c
    }
}
