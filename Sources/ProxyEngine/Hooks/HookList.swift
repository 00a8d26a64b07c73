/// A connection's hooks, in the order they hear each event: the counters,
/// presence, the rules, the breakpoints, then the capture (which records the
/// request as the rules left it). Made once, when the connection's
/// `ProxyPipeline` is made, and shared by its HTTP/2 streams; hooks hold
/// only what lasts, so one list serves every exchange on the connection.
/// Which hooks want body parts is worked out here, once: a body part costs
/// a call to those alone.
final class HookList: Sendable {
    let all: [any ExchangeHook]
    /// Those that want `requestBody` / `responseBody`.
    let bodies: [any ExchangeHook]
    /// Those that may decide how a request or a response goes on.
    let steering: [any ExchangeHook]
    /// The capture, for rows that are no HTTP exchange (refusals, tunnels)
    /// and for pins (nil: capture off).
    let capture: CaptureHook?
    let stats: TrafficStats

    init(_ hooks: [any ExchangeHook], stats: TrafficStats, capture: CaptureHook?) {
        all = hooks
        bodies = hooks.filter(\.wantsBodies)
        steering = hooks.filter(\.steers)
        self.stats = stats
        self.capture = capture
    }

    /// The hooks `services` asks for.
    convenience init(_ services: ProxyServices) {
        let capture = services.capture.map { CaptureHook(writer: $0) }
        var hooks: [any ExchangeHook] = [CounterHook(stats: services.stats)]
        if let presence = services.presence { hooks.append(PresenceHook(presence: presence)) }
        hooks.append(RuleHook(rules: services.rules))
        hooks.append(BreakpointHook(breakpoints: services.breakpoints))
        if let capture { hooks.append(capture) }
        self.init(hooks, stats: services.stats, capture: capture)
    }
}
