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
}
