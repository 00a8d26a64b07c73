import Foundation
import NIOHTTP1

enum HopByHop {
    static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        "te", "upgrade",
    ]

    /// The protocol a request asks to switch to (`Connection: upgrade` with
    /// `Upgrade: websocket`), if it does.
    static func upgrade(in headers: HTTPHeaders) -> String? {
        // Per request: most have no Upgrade, and need no token splitting.
        guard let value = headers.first(name: "upgrade"), !value.isEmpty else { return nil }
        // `Upgrade: h2c` is stripped, as mitmproxy does: HTTP/2 is this proxy's to offer (ALPN, prior knowledge).
        if value.lowercased() == "h2c" { return nil }
        let tokens = headers["connection"].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return tokens.contains("upgrade") ? value : nil
    }

    /// Removes hop-by-hop headers, including those named in `Connection`.
    /// Most messages carry none, or only `Connection: keep-alive`: one pass
    /// finds out, and only what is there is removed.
    static func strip(_ headers: inout HTTPHeaders) {
        var remove: [String] = []
        for (name, value) in headers where isListed(name) {
            if !remove.contains(where: { equalsIgnoringCase($0, name) }) { remove.append(name) }
            guard equalsIgnoringCase(name, "connection") || equalsIgnoringCase(name, "proxy-connection") else { continue }
            for token in value.utf8.split(separator: UInt8(ascii: ",")) {
                let trimmed = trim(token)
                // Framing is this proxy's business, whatever the client lists.
                guard !trimmed.isEmpty, !equalsIgnoringCase(trimmed, "transfer-encoding".utf8),
                    !equalsIgnoringCase(trimmed, "content-length".utf8),
                    !remove.contains(where: { equalsIgnoringCase($0.utf8, trimmed) })
                else { continue }
                remove.append(String(Substring(trimmed)))
            }
        }
        for name in remove { headers.remove(name: name) }
    }

    private static func trim(_ bytes: Substring.UTF8View.SubSequence) -> Substring.UTF8View.SubSequence {
        let isSpace = { (b: UInt8) in b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return bytes[bytes.endIndex...]
        }
        return bytes[first...last]
    }

    private static func isListed(_ name: String) -> Bool {
        names.contains { equalsIgnoringCase(name, $0) }
    }

    /// ASCII case-insensitive equality, without lowercasing copies.
    static func equalsIgnoringCase<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool { equalsIgnoringCase(a.utf8, b.utf8) }

    static func equalsIgnoringCase<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
        a.count == b.count
            && zip(a, b).allSatisfy { x, y in
                x == y || (x | 0x20 == y | 0x20 && (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(x | 0x20))
            }
    }
}
