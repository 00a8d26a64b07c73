import NIOHTTP1

/// Where a proxied request goes: a CONNECT authority or the authority of an
/// absolute-form URI.
struct ProxyTarget: Hashable, CustomStringConvertible {
    var host: String
    var port: Int

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `host:port`, `[v6]:port`, or `host` with `defaultPort`.
    static func parseAuthority(_ text: Substring, defaultPort: Int?) -> ProxyTarget? {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = text
        }
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        guard !host.isEmpty, host.allSatisfy({ $0.isLetter || $0.isNumber || "-._:%".contains($0) }) else { return nil }
        let port: Int
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { return nil }
            port = p
        } else {
            guard let defaultPort else { return nil }
            port = defaultPort
        }
        return ProxyTarget(host: String(host), port: port)
    }

    /// Splits `http://host[:port]/path?q` into target and origin-form.
    static func parseAbsoluteForm(_ uri: String) -> (target: ProxyTarget, originForm: String)? {
        guard let schemeEnd = uri.range(of: "://") else { return nil }
        guard uri[..<schemeEnd.lowerBound].lowercased() == "http" else { return nil }
        let rest = uri[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        guard let target = parseAuthority(rest[..<authorityEnd], defaultPort: 80) else { return nil }
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        return (target, path)
    }
}

enum HopByHop {
    static let names: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
        "te", "trailer", "upgrade",
    ]

    /// The protocol a request asks to switch to (`Connection: upgrade` with
    /// `Upgrade: websocket`), if it does.
    static func upgrade(in headers: HTTPHeaders) -> String? {
        // Per request: most have no Upgrade, and need no token splitting.
        guard let value = headers.first(name: "upgrade"), !value.isEmpty else { return nil }
        let tokens = headers["connection"].flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return tokens.contains("upgrade") ? value : nil
    }

    /// Removes hop-by-hop headers, including those named in `Connection`.
    static func strip(_ headers: inout HTTPHeaders) {
        var named = Set<String>()
        for value in headers["connection"] + headers["proxy-connection"] {
            for token in value.split(separator: ",") {
                named.insert(token.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        named.remove("transfer-encoding")
        named.remove("content-length")
        for name in names.union(named) { headers.remove(name: name) }
    }
}
