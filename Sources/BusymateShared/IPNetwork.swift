#if canImport(Glibc)
    import Glibc
#endif

/// An address range of `access.allow`: `10.0.0.0/8`, `fd00::/8`, or one
/// address (a /32 or /128). IPv4-mapped IPv6 clients (`::ffff:a.b.c.d`)
/// match IPv4 ranges, as a dual-stack socket reports them that way.
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes, with the host bits cleared.
    public let bytes: [UInt8]
    public let prefix: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = parts.first, let bytes = Self.bytes(of: String(address)) else { return nil }
        let width = bytes.count * 8
        var prefix = width
        if parts.count == 2 {
            guard let bits = Int(parts[1]), parts[1].allSatisfy(\.isNumber), (0...width).contains(bits) else { return nil }
            prefix = bits
        }
        self.prefix = prefix
        self.bytes = Self.masked(bytes, prefix: prefix)
    }

    public func contains(_ address: String) -> Bool {
        guard var candidate = Self.bytes(of: address) else { return false }
        if bytes.count == 4, candidate.count == 16, candidate.prefix(12).elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) {
            candidate = Array(candidate.suffix(4))
        }
        return candidate.count == bytes.count && Self.masked(candidate, prefix: prefix) == bytes
    }

    public var description: String {
        let text = bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : Self.text6(bytes)
        return "\(text)/\(prefix)"
    }

    /// The 4 or 16 bytes of an IP literal (brackets and a zone are not taken).
    public static func bytes(of text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
        return nil
    }

    private static func masked(_ bytes: [UInt8], prefix: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bits = prefix - index * 8
            if bits >= 8 { return byte }
            if bits <= 0 { return 0 }
            return byte & UInt8(truncatingIfNeeded: 0xff << (8 - bits))
        }
    }

    private static func text6(_ bytes: [UInt8]) -> String {
        var storage = in6_addr()
        withUnsafeMutableBytes(of: &storage) { raw in
            for (i, byte) in bytes.enumerated() where i < raw.count { raw[i] = byte }
        }
        var out = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &storage, &out, socklen_t(out.count)) != nil else { return "?" }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `address` is a loopback address (127/8, ::1, ::ffff:127/104).
    public static func isLoopback(_ address: String) -> Bool {
        loopbacks.contains { $0.contains(address) }
    }

    private static let loopbacks = [IPNetwork("127.0.0.0/8"), IPNetwork("::1/128")].compactMap { $0 }
}
