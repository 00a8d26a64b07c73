import BusymateShared
import CaptureStore
import NIOHTTP1

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
        if let rule = plan.mapRemote, case let .mapRemote(to) = rule.action,
            let mapped = MapRemote(rule: rule, to: to, originForm: originForm)
        {
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
