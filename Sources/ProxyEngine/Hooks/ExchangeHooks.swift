import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The one interface through which the hooks observe and steer an HTTP
/// exchange: the exchange handler reports each step here and does what the
/// steering hooks decide. Behind it: the rules (edit, block, map), the
/// breakpoints (hold), the capture hook (the row) and the counters. One per
/// connection, carrying the exchange under way; on its event loop.
///
/// With no rules and no breakpoints set, a step costs a flag test each.
struct ExchangeHooks {
    private let services: ProxyServices
    private let captureHook: CaptureHook?
    /// The row of the exchange under way (nil: capture off, or none under way).
    private(set) var capture: ExchangeCapture?
    /// The rules' decisions for the exchange under way.
    private(set) var plan = RulePlan()
    /// The exchange under way as filters (rules', breakpoints') read it;
    /// nil when none is set.
    private var liveExchange: FilterSubject?
    /// The rules the request was decided by, kept when a headers rule's
    /// filter may read the response (decided again at its head).
    private var rulesAtResponse: RuleEngine.Snapshot?

    init(services: ProxyServices) {
        self.services = services
        captureHook = services.captureHook
    }

    /// What the steering hooks decided about a request.
    enum RequestDecision {
        case forward
        /// A breakpoint holds it: read whole first.
        case hold
        /// A block rule: answer with its status, or hang up (`drop`).
        case block(Rule)
        case mapLocal(Rule)
        /// It must not go on (two Hosts, a smuggling shape, a loop).
        case refuse(HTTPResponseStatus, String)
    }

    /// What the connection knows of a request beyond its head, for its row.
    struct Origin {
        var client: SocketAddress?
        var clientSNI: String?
        /// The upstream connection in use already spoke TLS: what it chose.
        var reusedUpstreamHello: TLSHello?
        var resentFrom: String?
    }

    // MARK: the request

    /// A request head: the rules edit it (before it is recorded and sent),
    /// the counters count it, the capture hook starts its row, and the
    /// checks, the rules and the breakpoints decide how it goes on.
    mutating func requestHead(_ head: inout HTTPRequestHead, to target: ProxyTarget, _ originForm: String, route: ForwardRoute, from origin: Origin,
                              on eventLoop: EventLoop) -> RequestDecision {
        services.stats.requestStarted()
        services.presence?.touch()
        let rules = services.rules.isEmpty ? nil : services.rules.snapshot
        let breakpoints = services.breakpoints
        let url = ExchangeCapture.url(scheme: route.scheme, target: target, originForm: originForm)
        liveExchange = rules?.usesFilters == true || breakpoints.usesFilters
            ? Self.describe(head, url: url, target: target, route: route, origin: origin, device: services.peer.device) : nil
        let later = rules?.choosesAtResponse == true
        plan = rules?.plan(for: url, exchange: liveExchange, responseLater: later) ?? RulePlan()
        rulesAtResponse = later ? rules : nil
        if let edits = plan.requestEdits {
            edits.apply(to: &head.headers)
            // Breakpoints see the request as it goes on.
            liveExchange?.requestHeaders = head.headers.map { ($0.name, $0.value) }
        }
        if let captureHook {
            var row = captureHook.exchange(head, target: target, originForm: originForm, scheme: route.scheme, tlsMode: route.tlsMode,
                                           client: origin.client, eventLoop: eventLoop)
            row.record.resentFrom = origin.resentFrom
            row.record.rule = plan.applied.isEmpty ? nil : plan.applied.joined(separator: ", ")
            if case .intercepted = route {
                row.record.sni = origin.clientSNI
                if let hello = origin.reusedUpstreamHello { row.tls(hello, doneAt: nil) }
            }
            capture = row
        }
        for name in plan.timedOut { note(Self.timedOut(name)) }
        if let (status, why) = RequestHeadCheck.problem(head) {
            capture?.answered(status)
            return .refuse(status, why)
        }
        if let rule = plan.block {
            capture?.record.rule = rule.name
            return .block(rule)
        }
        if let rule = plan.mapLocal {
            let earlier = capture?.record.rule
            capture?.record.rule = [earlier, rule.name].compactMap { $0 }.joined(separator: ", ")
            return .mapLocal(rule)
        }
        if !breakpoints.isEmpty, let url = capture?.record.url, breakpoints.holds(.request, url, exchange: liveExchange) { return .hold }
        return .forward
    }

    var requestID: String? { capture?.record.requestID }

    /// A request as a filter reads it, before any rule edits it.
    private static func describe(_ head: HTTPRequestHead, url: String, target: ProxyTarget, route: ForwardRoute, origin: Origin,
                                    device: String?) -> FilterSubject {
        var exchange = FilterSubject(method: head.method.rawValue, url: url, host: target.host.lowercased(), scheme: route.scheme,
                                     tls: CaptureFilter.TLS(rawValue: route.tlsMode.rawValue) ?? .none)
        exchange.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        exchange.requestHeaders = head.headers.map { ($0.name, $0.value) }
        exchange.client = origin.client.map(ExchangeCapture.describe)
        exchange.device = device
        exchange.resent = origin.resentFrom != nil
        return exchange
    }

    /// The exchange as filters read it once its response head came.
    private func described(with head: HTTPResponseHead) -> FilterSubject? {
        guard var exchange = liveExchange else { return nil }
        exchange.status = Int(head.status.code)
        exchange.responseHeaders = head.headers.map { ($0.name, $0.value) }
        return exchange
    }

    /// The response edits for a response with `head`: the plan's, or, when
    /// a headers rule's filter reads the response, the first headers rule
    /// that matches the exchange now (named on the row once it applies).
    mutating func responseEdits(for head: HTTPResponseHead) -> Rule.HeaderEdits? {
        guard let rules = rulesAtResponse, let exchange = described(with: head) else { return plan.responseEdits }
        rulesAtResponse = nil
        let (found, timedOut) = rules.responseRule(for: exchange)
        for name in timedOut where !plan.timedOut.contains(name) {
            plan.timedOut.append(name)
            note(Self.timedOut(name))
        }
        guard let rule = found, case let .headers(_, edits) = rule.action, !edits.isEmpty else {
            plan.responseEdits = nil
            return nil
        }
        plan.responseEdits = edits
        if !plan.applied.contains(rule.name) {
            plan.applied.append(rule.name)
            let earlier = capture?.record.rule
            capture?.record.rule = [earlier, rule.name].compactMap { $0 }.joined(separator: ", ")
        }
        return edits
    }

    /// The note for a rule whose filter ran out of the request's budget.
    static func timedOut(_ rule: String) -> String {
        "the filter of rule \"\(rule)\" ran past \(RuleMatch.timeLimit) on this request and was taken as no match (simplify its regular expression)"
    }

    /// Something the proxy changed, for the row (its error column, which a
    /// real error joins).
    mutating func note(_ text: String) { capture?.notes.append(text) }
    var url: String? { capture?.record.url }

    mutating func requestBody(_ buffer: ByteBuffer) {
        services.stats.received(fromClient: buffer.readableBytes)
        capture?.requestBodyPart(buffer)
    }

    /// A part read into a held request: counted now, recorded as it goes on.
    func requestBodyHeld(_ buffer: ByteBuffer) {
        services.stats.received(fromClient: buffer.readableBytes)
    }

    /// A held request's body as it goes on (or is aborted): as held, or as edited.
    mutating func heldRequestBody(_ buffer: ByteBuffer) {
        capture?.requestBodyPart(buffer)
    }

    /// A breakpoint's edit: the row shows the request that went upstream.
    mutating func requestEdited(_ request: ClientRequest) {
        capture?.requestEdited(request.head, target: request.target, originForm: request.originForm)
        if var exchange = liveExchange {
            exchange.method = request.head.method.rawValue
            exchange.host = request.target.host.lowercased()
            exchange.url = ExchangeCapture.url(scheme: exchange.scheme, target: request.target, originForm: request.originForm)
            exchange.requestHeaders = request.head.headers.map { ($0.name, $0.value) }
            liveExchange = exchange
        }
    }

    // MARK: the upstream

    mutating func upstreamConnected(to server: SocketAddress?) { capture?.connected(to: server) }

    mutating func upstreamTLS(_ hello: TLSHello?, doneAt: Date?) { capture?.tls(hello, doneAt: doneAt) }

    // MARK: the response

    /// A final response head from the upstream: the rules edit it (it is
    /// recorded as the client gets it); true when a breakpoint holds it.
    mutating func responseHead(_ head: inout HTTPResponseHead) -> Bool {
        responseEdits(for: head)?.apply(to: &head.headers)
        let breakpoints = services.breakpoints
        guard !breakpoints.isEmpty, let url = capture?.record.url else { return false }
        return breakpoints.holds(.response, url, exchange: described(with: head))
    }

    /// The head as it goes to the client (after a hold, as released).
    mutating func responseHeadSent(_ head: HTTPResponseHead) { capture?.responseHead(head) }

    /// Trailers as they went on (HTTP/2, or HTTP/1 chunked).
    mutating func requestTrailers(_ trailers: HTTPHeaders) {
        capture?.record.requestTrailers = ExchangeRecord.encodeHeaders(trailers.map { ($0.name, $0.value) })
    }

    mutating func responseTrailers(_ trailers: HTTPHeaders) {
        capture?.record.responseTrailers = ExchangeRecord.encodeHeaders(trailers.map { ($0.name, $0.value) })
    }

    /// The proxy answered itself (a rule, a refusal, a breakpoint's abort).
    mutating func answered(_ status: HTTPResponseStatus) { capture?.answered(status) }

    /// The proxy's own answer, recorded as it is sent: status, headers and
    /// (but to a HEAD request) body.
    mutating func answered(_ local: LocalResponse, headRequest: Bool) {
        capture?.responseHead(local.head)
        if !headRequest, let body = local.body { capture?.responseBodyPart(body) }
    }

    mutating func responseBody(_ buffer: ByteBuffer) {
        services.stats.sent(toClient: buffer.readableBytes)
        capture?.responseBodyPart(buffer)
    }

    /// Recorded but not sent (a held response that was aborted).
    mutating func responseBodyUnsent(_ buffer: ByteBuffer) { capture?.responseBodyPart(buffer) }

    /// The exchange is over, well or (`error`) not: its row goes to the store.
    mutating func ended(error: String? = nil) {
        guard let row = capture else { return }
        capture = nil
        row.submit(error: error)
    }

    /// After a `101`: the handshake's row is written when both sides have
    /// closed, with the bytes that went each way.
    mutating func switched(client: Channel, server: Channel, counts: TunnelByteCounts) {
        guard let handshake = capture else { return }
        capture = nil
        client.closeFuture.and(server.closeFuture).whenComplete { _ in
            var closed = handshake
            closed.record.bytesUp = counts.up.load(ordering: .relaxed)
            closed.record.bytesDown = counts.down.load(ordering: .relaxed)
            closed.submit()
        }
    }
}

// MARK: breakpoints

extension ExchangeHooks {
    /// Hands a held message to the breakpoints; nil when it has no row
    /// (capture off): nobody could resolve it, so it goes on.
    func pause(_ message: RawHTTPMessage, bodyless: Bool = false, kind: BreakpointEvent.Kind,
               on eventLoop: EventLoop) -> EventLoopFuture<BreakpointResolution>? {
        guard let record = capture?.record else { return nil }
        return services.breakpoints.pause(message, bodyless: bodyless, kind: kind, requestID: record.requestID, method: record.method, url: record.url,
                                          on: eventLoop)
    }

    /// The client left while a message was held: it goes nowhere.
    func clientLeftWhileHeld() {
        guard let requestID = capture?.record.requestID else { return }
        services.breakpoints.clientLeft(requestID: requestID)
    }
}

// MARK: what is no HTTP exchange

extension ExchangeHooks {
    /// A CONNECT that is passed through: counted, and its row follows it
    /// (`TunnelCapture`: opened, failed, closed).
    func tunnelOpened(_ head: HTTPRequestHead, target: ProxyTarget, client: SocketAddress?) -> TunnelCapture? {
        services.stats.requestStarted()
        return captureHook?.tunnel(head, target: target, client: client)
    }

    /// A passed-through tunnel whose sides have both closed.
    func tunnelClosed(_ tunnel: TunnelCapture?, counts: TunnelByteCounts) {
        tunnel?.closed(counts)
    }

    /// A CONNECT that is intercepted: counted (its requests are exchanges of their own).
    func tunnelIntercepted() { services.stats.requestStarted() }

    /// The client's TLS handshake with an intercepting leaf failed.
    func handshakeRefused(_ target: ProxyTarget, sni: String?, client: SocketAddress?, why: String) {
        captureHook?.handshakeFailed(target, sni: sni, client: client, why: why)
    }

    /// A request the decoder refused before it parsed whole.
    func requestRefused(line: (method: String, target: String)?, intercepted target: ProxyTarget?, client: SocketAddress?,
                        status: HTTPResponseStatus, why: String, answer: LocalResponse?) {
        captureHook?.requestRefused(line: line, intercepted: target, client: client, status: status, why: why, answer: answer)
    }

    /// A SOCKS5 handshake refused, broken off or whose target could not be dialled.
    func socksRefused(_ target: ProxyTarget?, client: SocketAddress?, why: String) {
        captureHook?.socksRefused(target, client: client, why: why)
    }

    /// A request head that did not arrive whole in time.
    func requestHeadTimedOut(intercepted target: ProxyTarget?, client: SocketAddress?, why: String) {
        captureHook?.requestHeadTimedOut(intercepted: target, client: client, why: why)
    }
}
