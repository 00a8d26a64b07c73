import BusymateShared
import Logging

/// What every connection's layers share: counters, the interception
/// decision, rules, breakpoints and the capture writer (nil: capture off),
/// and the connection's hooks made of them.
struct ProxyServices: Sendable {
    let stats: TrafficStats
    let interception: Interception
    let rules: RuleEngine
    let breakpoints: any BreakpointHolds
    let capture: (any CaptureSink)?
    /// Taken when the connection opened (`timeouts.*` in settings.json).
    let timeouts: AppSettings.Timeouts
    let logger: Logger
    /// The connection's hooks: made once by its `ProxyPipeline` (nil until
    /// then), shared by its HTTP/2 streams.
    var hooks: HookList?
    /// Who the client is (its device) and how it arrived.
    var peer = CapturePeer.unknown
    /// Presence and access (nil in handler tests).
    var devices: DeviceRegistry?
    /// This connection's presence, at most once a second (nil in handler tests).
    var presence: PresenceTouch?
    /// Names learned from DNS answers, for connections with no SNI or Host.
    var dnsNames: DNSNames?
    /// The WebSockets this tunnel carries (nil in handler tests).
    var sockets: WebSocketRegistry?
    /// Where upstream connections come from: the network, or a test's stand-in.
    let connector: UpstreamConnector

    init(
        stats: TrafficStats, interception: Interception, rules: RuleEngine, breakpoints: any BreakpointHolds,
        capture: (any CaptureSink)? = nil,
        timeouts: AppSettings.Timeouts = .init(), logger: Logger = Logger(label: "busymate.connect"),
        connector: UpstreamConnector = SocketConnector()
    ) {
        self.connector = connector
        self.stats = stats
        self.interception = interception
        self.rules = rules
        self.breakpoints = breakpoints
        self.capture = capture
        self.timeouts = timeouts
        self.logger = logger
    }
}
