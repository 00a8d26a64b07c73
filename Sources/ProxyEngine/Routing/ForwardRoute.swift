import BusymateShared
import CaptureStore
import NIOHTTP1

/// Where a client connection's requests go.
enum ForwardRoute {
    /// The explicit proxy: each request names its host (`GET http://host/`).
    case absoluteForm
    /// A decrypted CONNECT tunnel: origin-form requests to one host, over TLS.
    case intercepted(ProxyTarget, UpstreamTLS)
    /// Plain HTTP redirected by nftables: origin-form requests whose Host
    /// names the host (the original destination when there is none).
    case transparent(ProxyTarget)

    var scheme: String {
        if case .intercepted = self { return "https" }
        return "http"
    }

    var tlsMode: ExchangeRecord.TLSMode {
        if case .intercepted = self { return .mitm }
        return .none
    }

    /// The request's destination and its origin-form target, or nil when it has none.
    func destination(of head: HTTPRequestHead) -> (target: ProxyTarget, originForm: String)? {
        switch self {
        case .absoluteForm:
            guard let parsed = ProxyTarget.parseAbsoluteForm(head.uri) else { return nil }
            // RFC 9112 §3.2.4: OPTIONS to a URL without a path asks about
            // the server itself, and goes on as `OPTIONS *`.
            if head.method == .OPTIONS, let scheme = head.uri.range(of: "://"), !head.uri[scheme.upperBound...].contains("/") {
                return (parsed.target, "*")
            }
            return parsed
        case let .intercepted(target, _):
            if head.uri.hasPrefix("/") {
                // As in absolute-form: a fragment never goes on the wire (RFC 9110 §4.2.4).
                guard let hash = head.uri.utf8.firstIndex(of: UInt8(ascii: "#")) else { return (target, head.uri) }
                return (target, String(head.uri[..<hash]))
            }
            if head.uri == "*" { return (target, head.uri) }
            // Absolute-form inside the tunnel: the tunnel's host still decides.
            guard let schemeEnd = head.uri.range(of: "://") else { return nil }
            let rest = head.uri[schemeEnd.upperBound...]
            let path = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
            return (target, path)
        case let .transparent(original):
            // The port is where the client was going, whatever Host says (the
            // address is pinned too): Host and absolute-form name the host only.
            if !head.uri.hasPrefix("/"), let parsed = ProxyTarget.parseAbsoluteForm(head.uri) {
                return (ProxyTarget(host: parsed.target.host, port: original.port), parsed.originForm)
            }
            guard head.uri.hasPrefix("/") || head.uri == "*" else { return nil }
            let path = head.uri.utf8.firstIndex(of: UInt8(ascii: "#")).map { String(head.uri[..<$0]) } ?? head.uri
            if let host = head.headers.first(name: "host"),
                let named = ProxyTarget.parseAuthority(Substring(host), defaultPort: original.port)
            {
                return (ProxyTarget(host: named.host, port: original.port), path)
            }
            return (original, path)
        }
    }

    /// Why a request has no destination, in words for the client.
    static func whyNoDestination(_ head: HTTPRequestHead) -> String {
        head.uri.lowercased().hasPrefix("https://")
            ? "https:// URLs go through CONNECT; this proxy does not fetch them in absolute form"
            : "this is a proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port"
    }
}
