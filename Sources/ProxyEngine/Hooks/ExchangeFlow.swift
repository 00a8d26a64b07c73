import BusymateShared
import NIOCore
import NIOHTTP1

/// One exchange as the hooks share it (mitmproxy's flow): what the request
/// was, the rules' plan, the exchange as filters read it, and the row being
/// built. `ExchangeHooks` makes one per request and hands it to each hook in
/// turn; the hooks keep no per-exchange state of their own. On the
/// connection's event loop.
struct ExchangeFlow {
    /// As rows store it and rules match it (after a breakpoint's edit, as edited).
    var url = ""
    var target = ProxyTarget(host: "", port: 0)
    var originForm = ""
    var route = ForwardRoute.absoluteForm
    var origin = ExchangeHooks.Origin()
    /// Who the client is and how it came (its device, front end, connection and stream).
    var peer = CapturePeer.unknown
    /// The connection's: body files are written from it.
    var eventLoop: EventLoop?
    /// The rules' decisions for this exchange.
    var plan = RulePlan()
    /// The rules the request was decided by, kept when a headers rule's
    /// filter may read the response (decided again at its head).
    var rulesAtResponse: RuleEngine.Snapshot?
    /// The exchange as filters (rules', breakpoints') read it; nil until a
    /// hook that matches filters asks for it.
    var subject: FilterSubject?
    /// The row being built (nil: capture off, or no exchange under way).
    var row: ExchangeCapture?
    /// What the proxy changed and the row should say, though nothing failed.
    var notes: [String] = []

    init() {}

    init(
        head: HTTPRequestHead, target: ProxyTarget, originForm: String, route: ForwardRoute, origin: ExchangeHooks.Origin,
        peer: CapturePeer,
        eventLoop: EventLoop
    ) {
        url = ExchangeCapture.url(scheme: route.scheme, target: target, originForm: originForm)
        (self.target, self.originForm, self.route, self.origin, self.peer, self.eventLoop) = (
            target, originForm, route, origin, peer, eventLoop
        )
    }

    var requestID: String? { row?.record.requestID }

    /// The request as a filter reads it: described once, by the first hook
    /// that asks (the rules before their edits; the breakpoints see the
    /// edited headers, which the rules write back).
    mutating func describe(_ head: HTTPRequestHead) {
        guard subject == nil else { return }
        var exchange = FilterSubject(
            method: head.method.rawValue, url: url, host: target.host.lowercased(), scheme: route.scheme,
            tls: CaptureFilter.TLS(rawValue: route.tlsMode.rawValue) ?? .none)
        exchange.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        exchange.requestHeaders = head.headers.map { ($0.name, $0.value) }
        exchange.client = origin.client.map(ExchangeCapture.describe)
        exchange.device = peer.device
        exchange.resent = origin.resentFrom != nil
        subject = exchange
    }

    /// The exchange as filters read it once its response head came.
    func subject(with head: HTTPResponseHead) -> FilterSubject? {
        guard var exchange = subject else { return nil }
        exchange.status = Int(head.status.code)
        exchange.responseHeaders = head.headers.map { ($0.name, $0.value) }
        return exchange
    }

    /// A breakpoint's edit: the request that goes upstream.
    mutating func edited(_ request: ClientRequest) {
        (target, originForm) = (request.target, request.originForm)
        url = ExchangeCapture.url(scheme: route.scheme, target: request.target, originForm: request.originForm)
        guard var exchange = subject else { return }
        exchange.method = request.head.method.rawValue
        exchange.host = request.target.host.lowercased()
        exchange.url = url
        exchange.requestHeaders = request.head.headers.map { ($0.name, $0.value) }
        subject = exchange
    }

    /// A rule acted on this exchange: named on its row.
    mutating func applied(_ rule: String) {
        if !plan.applied.contains(rule) { plan.applied.append(rule) }
    }
}
