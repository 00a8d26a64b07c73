import Foundation
import NIOHTTP1

/// Where a proxied request goes: a CONNECT authority or the authority of an
/// absolute-form URI.
struct ProxyTarget: Hashable, CustomStringConvertible {
    var host: String
    var port: Int

    var description: String { isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// An IPv6 literal (a byte test: Foundation's `contains` for a String
    /// argument is a locale-aware search).
    var isIPv6: Bool { host.utf8.contains(UInt8(ascii: ":")) }

    /// `host:port`, `[v6]:port`, or `host` with `defaultPort`. Parsed as
    /// bytes: it runs for every request, and Character-level work was dear.
    static func parseAuthority(_ text: Substring, defaultPort: Int?) -> ProxyTarget? {
        let bytes = text.utf8
        var host: Substring.UTF8View.SubSequence
        var portText: Substring.UTF8View.SubSequence?
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = bytes[bytes.index(after: bytes.startIndex)..<close]
            let rest = bytes[bytes.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == UInt8(ascii: ":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = bytes.lastIndex(of: UInt8(ascii: ":")) {
            host = bytes[..<colon]
            portText = bytes[bytes.index(after: colon)...]
        } else {
            host = bytes[...]
        }
        if let at = host.lastIndex(of: UInt8(ascii: "@")) { host = host[host.index(after: at)...] }
        guard !host.isEmpty, host.allSatisfy(isHostByte) else { return nil }
        let port: Int
        if let portText {
            guard let p = parsePort(portText) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        return ProxyTarget(host: String(Substring(host)), port: port)
    }

    /// Letters, digits, `-._:%`, and the bytes of non-ASCII letters (IDNs
    /// written out).
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "%"), 0x80...0xFF:
            return true
        default:
            return false
        }
    }

    private static func parsePort<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Int? {
        guard !bytes.isEmpty, bytes.count <= 5 else { return nil }
        var value = 0
        for byte in bytes {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return (1...65535).contains(value) ? value : nil
    }

    /// Splits `http://host[:port]/path?q` into target and origin-form.
    static func parseAbsoluteForm(_ uri: String) -> (target: ProxyTarget, originForm: String)? {
        let bytes = uri.utf8
        // "http://", in any case.
        guard bytes.count >= 7 else { return nil }
        let scheme = Array("http://".utf8)
        var index = bytes.startIndex
        for expected in scheme {
            let byte = bytes[index]
            guard byte == expected || (expected >= UInt8(ascii: "a") && byte | 0x20 == expected) else { return nil }
            index = bytes.index(after: index)
        }
        let rest = bytes[index...]
        let authorityEnd =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        guard let target = parseAuthority(Substring(rest[..<authorityEnd]), defaultPort: 80) else { return nil }
        var pathBytes = rest[authorityEnd...]
        if let hash = pathBytes.firstIndex(of: UInt8(ascii: "#")) { pathBytes = pathBytes[..<hash] }
        let path = String(Substring(pathBytes))
        if path.isEmpty || pathBytes.first == UInt8(ascii: "?") { return (target, "/" + path) }
        return (target, path)
    }
}
