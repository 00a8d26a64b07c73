import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// One thing that follows HTTP exchanges, as mitmproxy's addons do: the
/// rules, the breakpoints, the capture (the row), the counters, presence.
/// Each is told every step of an exchange, in the order the list holds
/// them, with the exchange's `ExchangeFlow`, which carries all of its
/// per-exchange state; the hook itself holds only what lasts (settings,
/// counters, a sink). Every event has a no-op default: a hook implements
/// what it cares for. Steering hooks (rules, breakpoints) answer for the
/// request head and the response head. Called on the connection's event
/// loop: nothing here may block (store writes go through `CaptureSink`).
protocol ExchangeHook: Sendable {
    /// Whether `requestBody` and `responseBody` matter to it: the list
    /// calls only those that say so for each body part.
    var wantsBodies: Bool { get }
    /// Whether it may answer `decide(request:)` or `decide(response:)`
    /// (rules, breakpoints): only those are asked.
    var steers: Bool { get }

    // MARK: the request

    /// A request head (mitmproxy's `requestheaders`): a hook may edit it
    /// before later hooks see it and before it goes on.
    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow)
    /// How the request goes on; nil: this hook does not steer it. The first
    /// hook with an answer decides.
    func decide(request flow: inout ExchangeFlow) -> ExchangeHooks.RequestDecision?
    func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow)
    func requestTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow)
    /// A breakpoint's edit: what goes upstream now (the flow says so already).
    func requestEdited(_ request: ClientRequest, _ flow: inout ExchangeFlow)

    // MARK: the upstream

    func upstreamConnected(to server: SocketAddress?, _ flow: inout ExchangeFlow)
    func upstreamTLS(_ hello: TLSHello?, doneAt: Date?, _ flow: inout ExchangeFlow)

    // MARK: the response

    /// A final response head from the upstream (`responseheaders`): a hook
    /// may edit it; it reaches the client as the last one left it.
    func responseHead(_ head: inout HTTPResponseHead, _ flow: inout ExchangeFlow)
    /// True: hold the response (a breakpoint). Any hook may hold it.
    func decide(response head: HTTPResponseHead, _ flow: inout ExchangeFlow) -> Bool
    /// The head as the client gets it (after a hold, as released).
    func responseHeadSent(_ head: HTTPResponseHead, _ flow: inout ExchangeFlow)
    func responseBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow)
    func responseTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow)
    /// The proxy answered itself: its status only (a refusal, a timeout) ...
    func answered(_ status: HTTPResponseStatus, _ flow: inout ExchangeFlow)
    /// ... or the answer as sent (a rule, a breakpoint's abort, an error page).
    func answered(_ local: LocalResponse, headRequest: Bool, _ flow: inout ExchangeFlow)

    // MARK: the end

    /// The exchange is over, well or (`error`) not.
    func ended(error: String?, _ flow: inout ExchangeFlow)
    /// After a `101`: bytes are glued; `counts` are final once both have closed.
    func switched(client: Channel, server: Channel, counts: TunnelByteCounts, _ flow: inout ExchangeFlow)
    /// After a `101` to a WebSocket whose frames the proxy reads: what
    /// follows its messages (nil: this hook does not).
    func webSocketOpened(_ handshake: WebSocketHandshake, _ flow: inout ExchangeFlow) -> (any WebSocketObserver)?

    // MARK: held messages

    /// Hands a held message over; nil: this hook does not hold messages.
    func pause(
        _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, _ flow: ExchangeFlow,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution>?
    /// The client left while a message was held.
    func clientLeftWhileHeld(_ flow: ExchangeFlow)
}

extension ExchangeHook {
    var wantsBodies: Bool { false }
    var steers: Bool { false }
    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) {}
    func decide(request flow: inout ExchangeFlow) -> ExchangeHooks.RequestDecision? { nil }
    func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {}
    func requestTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow) {}
    func requestEdited(_ request: ClientRequest, _ flow: inout ExchangeFlow) {}
    func upstreamConnected(to server: SocketAddress?, _ flow: inout ExchangeFlow) {}
    func upstreamTLS(_ hello: TLSHello?, doneAt: Date?, _ flow: inout ExchangeFlow) {}
    func responseHead(_ head: inout HTTPResponseHead, _ flow: inout ExchangeFlow) {}
    func decide(response head: HTTPResponseHead, _ flow: inout ExchangeFlow) -> Bool { false }
    func responseHeadSent(_ head: HTTPResponseHead, _ flow: inout ExchangeFlow) {}
    func responseBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {}
    func responseTrailers(_ trailers: HTTPHeaders, _ flow: inout ExchangeFlow) {}
    func answered(_ status: HTTPResponseStatus, _ flow: inout ExchangeFlow) {}
    func answered(_ local: LocalResponse, headRequest: Bool, _ flow: inout ExchangeFlow) {}
    func ended(error: String?, _ flow: inout ExchangeFlow) {}
    func switched(client: Channel, server: Channel, counts: TunnelByteCounts, _ flow: inout ExchangeFlow) {}
    func webSocketOpened(_ handshake: WebSocketHandshake, _ flow: inout ExchangeFlow) -> (any WebSocketObserver)? { nil }
    func pause(
        _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, _ flow: ExchangeFlow,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution>? { nil }
    func clientLeftWhileHeld(_ flow: ExchangeFlow) {}
}
