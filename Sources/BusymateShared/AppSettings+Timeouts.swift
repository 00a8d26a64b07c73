extension AppSettings {
    /// How long the proxy waits on each side, in the style of nginx's
    /// `client_header_timeout` and HAProxy's `timeout http-request`.
    public struct Timeouts: Sendable, Equatable {
        /// A request head (from its first byte, or from the connection's
        /// start) must be whole within this: slowloris ends here.
        public var requestHead: Double = 30
        /// A keep-alive connection with no request in flight closes after this.
        public var idle: Double = 60
        /// A request body that sends no byte for this long is given up.
        public var bodyProgress: Double = 60
        /// The client's TLS handshake with an intercepting tunnel.
        public var tlsHandshake: Double = 10
        /// From the request's end reaching the server to its response head.
        public var upstreamResponse: Double = 120
        /// A passed-through tunnel (CONNECT or transparent) with no byte
        /// either way for this long is closed, as HAProxy's `timeout tunnel`.
        public var tunnelIdle: Double = 600
        /// Not a key of its own: how long a draining tunnel lets an idle
        /// kept-alive connection send one more request, from
        /// `tunnel.drain_seconds` (half a second less, at least one).
        public var drainIdleWait: Double = 4.5

        public init() {}

        /// Setting name, value, as settings.json spells them.
        public static let keys = [
            "request_head_seconds", "idle_seconds", "body_seconds", "tls_handshake_seconds", "upstream_response_seconds",
            "tunnel_idle_seconds",
        ]
    }
}
