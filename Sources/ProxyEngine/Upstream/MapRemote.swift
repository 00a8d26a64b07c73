import BusymateShared

/// Where a `map_remote` rule sends a request: the scheme, host and port of
/// its `to` URL; and the path below the pattern's fixed prefix appended to
/// the `to` path (`api.test/v1/*` to `http://127.0.0.1:3000/api/`:
/// `/v1/users?page=2` goes to `/api/users?page=2`), or the request's own
/// path when `to` has none. The origin sees its own name in `Host`.
struct MapRemote {
    var target: ProxyTarget
    var secure: Bool
    var originForm: String
    var hostHeader: String

    init?(rule: Rule, to: String, originForm: String) {
        guard let schemeEnd = to.range(of: "://") else { return nil }
        let scheme = to[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        secure = scheme == "https"
        let rest = to[schemeEnd.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let target = ProxyTarget.parseAuthority(rest[..<slash], defaultPort: secure ? 443 : 80) else { return nil }
        self.target = target
        let toPath = String(rest[slash...])
        if toPath.isEmpty {
            self.originForm = originForm
        } else {
            let prefix = rule.match.pathPrefix
            var remainder = originForm.hasPrefix(prefix) ? String(originForm.dropFirst(prefix.count)) : originForm
            if toPath.hasSuffix("/"), remainder.hasPrefix("/") { remainder.removeFirst() }
            self.originForm = toPath + remainder
        }
        let defaultPort = secure ? 443 : 80
        hostHeader = ExchangeCapture.bracketed(target.host) + (target.port == defaultPort ? "" : ":\(target.port)")
    }
}
