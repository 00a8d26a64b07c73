import BusymateShared
import CaptureStore
import NIOCore
import NIOHTTP1

/// The breakpoints as a hook: a request or a response that matches one is
/// held (read whole, then handed to `pause` until someone resolves it).
/// With no breakpoints set, each step is one atomic load.
struct BreakpointHook: ExchangeHook {
    var steers: Bool { true }
    let breakpoints: any BreakpointHolds

    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) {
        // After the rules: a filter reads the request as it goes on.
        if !breakpoints.isEmpty && breakpoints.usesFilters { flow.describe(head) }
    }

    func decide(request flow: inout ExchangeFlow) -> ExchangeHooks.RequestDecision? {
        // No row (capture off): nobody could resolve a held message.
        guard !breakpoints.isEmpty, flow.row != nil, breakpoints.holds(.request, flow.url, exchange: flow.subject) else { return nil }
        return .hold
    }

    func decide(response head: HTTPResponseHead, _ flow: inout ExchangeFlow) -> Bool {
        guard !breakpoints.isEmpty, flow.row != nil else { return false }
        return breakpoints.holds(.response, flow.url, exchange: flow.subject(with: head))
    }

    func pause(
        _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, _ flow: ExchangeFlow,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution>? {
        guard let record = flow.row?.record else { return nil }
        return breakpoints.pause(
            message, bodyless: bodyless, kind: kind, requestID: record.requestID, method: record.method, url: record.url,
            on: eventLoop)
    }

    func clientLeftWhileHeld(_ flow: ExchangeFlow) {
        guard let requestID = flow.requestID else { return }
        breakpoints.clientLeft(requestID: requestID)
    }
}
