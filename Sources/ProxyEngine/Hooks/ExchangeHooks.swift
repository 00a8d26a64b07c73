import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The one interface through which the hooks observe and steer an HTTP
/// exchange: the exchange handler reports each step here and does what the
/// steering hooks decide. Behind it: the connection's `HookList` (rules,
/// breakpoints, capture, counters, presence: each an `ExchangeHook`),
/// told each step in turn with the exchange's `ExchangeFlow`, which this
/// value carries. One per exchange handler (an HTTP/1 connection, or an
/// HTTP/2 stream); on its event loop.
///
/// With no rules and no breakpoints set, a step costs a flag test each.
struct ExchangeHooks {
    let services: ProxyServices
    let hookList: HookList
    /// The exchange under way (or the last one): its plan, its row.
    private(set) var flow = ExchangeFlow()

    /// The connection's list when its `ProxyPipeline` made one, else (a
    /// handler made on its own, in a test) a list of its own.
    init(services: ProxyServices) {
        self.services = services
        hookList = services.hooks ?? HookList(services)
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

    /// A request head: the hooks hear it in turn (the rules edit it before
    /// the capture records it), then the checks and the steering hooks
    /// decide how it goes on.
    mutating func requestHead(
        _ head: inout HTTPRequestHead, to target: ProxyTarget, _ originForm: String, route: ForwardRoute, from origin: Origin,
        on eventLoop: EventLoop
    ) -> RequestDecision {
        flow = ExchangeFlow(
            head: head, target: target, originForm: originForm, route: route, origin: origin, peer: services.peer, eventLoop: eventLoop)
        for hook in hookList.all { hook.requestHead(&head, &flow) }
        if let (status, why) = RequestHeadCheck.problem(head) {
            answered(status)
            return .refuse(status, why)
        }
        for hook in hookList.steering {
            if let decision = hook.decide(request: &flow) { return decision }
        }
        return .forward
    }

    var requestID: String? { flow.requestID }
    /// The rules' decisions for the exchange under way.
    var plan: RulePlan { flow.plan }
    var url: String? { flow.row?.record.url }

    /// Something the proxy changed, for the row (its note column).
    mutating func note(_ text: String) { flow.notes.append(text) }

    mutating func requestBody(_ buffer: ByteBuffer) { body(buffer, .forwarded, request: true) }

    /// A part read into a held request: counted now, recorded as it goes on.
    mutating func requestBodyHeld(_ buffer: ByteBuffer) { body(buffer, .held, request: true) }

    /// A held request's body as it goes on (or is aborted): as held, or as edited.
    mutating func heldRequestBody(_ buffer: ByteBuffer) { body(buffer, .released, request: true) }

    private mutating func body(_ buffer: ByteBuffer, _ fate: BodyPartFate, request: Bool) {
        for hook in hookList.bodies {
            if request { hook.requestBody(buffer, fate, &flow) } else { hook.responseBody(buffer, fate, &flow) }
        }
    }

    /// A breakpoint's edit: the row shows the request that went upstream.
    mutating func requestEdited(_ request: ClientRequest) {
        flow.edited(request)
        for hook in hookList.all { hook.requestEdited(request, &flow) }
    }

    /// Trailers as they went on (HTTP/2, or HTTP/1 chunked).
    mutating func requestTrailers(_ trailers: HTTPHeaders) {
        for hook in hookList.all { hook.requestTrailers(trailers, &flow) }
    }

    // MARK: the upstream

    mutating func upstreamConnected(to server: SocketAddress?) {
        for hook in hookList.all { hook.upstreamConnected(to: server, &flow) }
    }

    mutating func upstreamTLS(_ hello: TLSHello?, doneAt: Date?) {
        for hook in hookList.all { hook.upstreamTLS(hello, doneAt: doneAt, &flow) }
    }

    // MARK: the response

    /// A final response head from the upstream: the hooks edit it (it is
    /// recorded as the client gets it); true when a steering hook holds it.
    mutating func responseHead(_ head: inout HTTPResponseHead) -> Bool {
        for hook in hookList.all { hook.responseHead(&head, &flow) }
        for hook in hookList.steering where hook.decide(response: head, &flow) { return true }
        return false
    }

    /// The rules' response edits for a response with `head` (a local answer
    /// takes them as it is made): what `responseHead` would apply.
    mutating func responseEdits(for head: HTTPResponseHead) -> Rule.HeaderEdits? {
        var head = head
        for hook in hookList.all { hook.responseHead(&head, &flow) }
        return flow.plan.responseEdits
    }

    /// The head as it goes to the client (after a hold, as released).
    mutating func responseHeadSent(_ head: HTTPResponseHead) {
        for hook in hookList.all { hook.responseHeadSent(head, &flow) }
    }

    mutating func responseTrailers(_ trailers: HTTPHeaders) {
        for hook in hookList.all { hook.responseTrailers(trailers, &flow) }
    }

    /// The proxy answered itself (a rule, a refusal, a breakpoint's abort).
    mutating func answered(_ status: HTTPResponseStatus) {
        for hook in hookList.all { hook.answered(status, &flow) }
    }

    /// The proxy's own answer, recorded as it is sent: status, headers and
    /// (but to a HEAD request) body.
    mutating func answered(_ local: LocalResponse, headRequest: Bool) {
        for hook in hookList.all { hook.answered(local, headRequest: headRequest, &flow) }
    }

    mutating func responseBody(_ buffer: ByteBuffer) { body(buffer, .forwarded, request: false) }

    /// Recorded but not sent (a held response that was aborted).
    mutating func responseBodyUnsent(_ buffer: ByteBuffer) { body(buffer, .unsent, request: false) }

    /// The exchange is over, well or (`error`) not: its row goes to the store.
    mutating func ended(error: String? = nil) {
        for hook in hookList.all { hook.ended(error: error, &flow) }
    }

    /// After a `101`: the handshake's row is written when both sides have
    /// closed, with the bytes that went each way.
    mutating func switched(client: Channel, server: Channel, counts: TunnelByteCounts) {
        for hook in hookList.all { hook.switched(client: client, server: server, counts: counts, &flow) }
    }

    /// After a `101` to a WebSocket: the handshake's row is written now, and
    /// its messages follow it (the observers: the capture's).
    mutating func webSocketOpened(_ handshake: WebSocketHandshake) -> [any WebSocketObserver] {
        hookList.all.compactMap { $0.webSocketOpened(handshake, &flow) }
    }

    /// Whether anything records a socket's messages: else its bytes are glued.
    var followsWebSockets: Bool { hookList.capture != nil }
}
