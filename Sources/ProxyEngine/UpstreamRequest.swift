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
            if let host = head.headers.first(name: "host"), let named = ProxyTarget.parseAuthority(Substring(host), defaultPort: original.port) {
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

/// A request as it goes upstream: hop-by-hop headers out (but the Upgrade
/// the origin must see), the URL's authority as Host, `Via` added, then
/// map_remote's destination and `upstream_proxy`'s absolute-form.
struct UpstreamRequest {
    var head: HTTPRequestHead
    /// Where the connection goes: the target, or map_remote's.
    var destination: ProxyTarget
    /// Over TLS (an intercepted tunnel, or map_remote to https://).
    var secure: Bool
    /// `upstream_proxy` for this destination, when it has one.
    var chained: UpstreamProxySetting?
    /// The protocol the client asked to switch to.
    var upgrade: String?

    init(_ request: ClientRequest, route: ForwardRoute, plan: RulePlan, interception: Interception) {
        let (client, target, originForm) = (request.head, request.target, request.originForm)
        var headers = client.headers
        let upgrade = HopByHop.upgrade(in: headers)
        // `TE: trailers` says the client takes trailers, which go end to end
        // here; gRPC servers insist on it (HTTP/2 allows that value only).
        let takesTrailers = headers["te"].contains { $0.lowercased().contains("trailers") }
        HopByHop.strip(&headers)
        if takesTrailers { headers.add(name: "TE", value: "trailers") }
        if let upgrade {
            // The one hop-by-hop request the origin must see: it is the origin that switches.
            headers.add(name: "Connection", value: "Upgrade")
            headers.add(name: "Upgrade", value: upgrade)
        }
        // RFC 9112 §3.2.2: an absolute-form URL's authority is the Host,
        // whatever the client's own Host header said.
        if case .absoluteForm = route {
            headers.replaceOrAdd(name: "Host", value: target.port == 80 ? ExchangeCapture.bracketed(target.host) : target.description)
        } else if !headers.contains(name: "host") {
            headers.add(name: "Host", value: target.port == 443 ? ExchangeCapture.bracketed(target.host) : target.description)
        }
        headers.add(name: "Via", value: LoopGuard.shared.via(receivedAs: client.version))
        // map_remote: the row keeps what the client asked for; upstream gets the rule's destination.
        var (destination, path, secure) = (target, originForm, { if case .intercepted = route { true } else { false } }())
        if let rule = plan.mapRemote, case let .mapRemote(to) = rule.action, let mapped = MapRemote(rule: rule, to: to, originForm: originForm) {
            (destination, path, secure) = (mapped.target, mapped.originForm, mapped.secure)
            headers.replaceOrAdd(name: "Host", value: mapped.hostHeader)
        }
        // Plain HTTP through an HTTP upstream_proxy: absolute-form, with its
        // credentials (through SOCKS5 it is origin-form inside the tunnel).
        let chained = interception.upstreamProxy(for: destination.host)
        var uri = path
        if let chained, !secure, chained.scheme == .http {
            uri = "http://\(destination.port == 80 ? ExchangeCapture.bracketed(destination.host) : destination.description)\(path)"
            if let authorization = chained.authorization { headers.replaceOrAdd(name: "Proxy-Authorization", value: authorization) }
        }
        head = HTTPRequestHead(version: .http1_1, method: client.method, uri: uri, headers: headers)
        self.destination = destination
        self.secure = secure
        self.chained = chained
        self.upgrade = upgrade
    }
}

/// A response head as the client gets it, given the framing the exchange
/// state machine chose.
enum ResponseFraming {
    static func clientHead(_ upstream: HTTPResponseHead, framing: ExchangeStateMachine.Framing, close: Bool, clientIsHTTP10: Bool,
                           upgrade: String? = nil) -> HTTPResponseHead {
        var headers = upstream.headers
        HopByHop.strip(&headers)
        if upstream.status == .switchingProtocols {
            headers.add(name: "Connection", value: "Upgrade")
            headers.add(name: "Upgrade", value: upstream.headers["upgrade"].first ?? upgrade ?? "")
            return HTTPResponseHead(version: .http1_1, status: upstream.status, headers: headers)
        }
        switch framing {
        case .bodyless: headers.remove(name: "transfer-encoding")
        case .asIs: if headers.contains(name: "transfer-encoding") { headers.remove(name: "content-length") }
        case .chunked: headers.add(name: "Transfer-Encoding", value: "chunked")
        case .closeDelimited: break
        }
        if upstream.status.code >= 200 {
            if close {
                headers.replaceOrAdd(name: "Connection", value: "close")
            } else if clientIsHTTP10 {
                headers.replaceOrAdd(name: "Connection", value: "keep-alive")
            }
        }
        return HTTPResponseHead(version: .http1_1, status: upstream.status, headers: headers)
    }
}
