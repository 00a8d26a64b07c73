import NIOCore

/// One row of the table.
struct Scenario {
    let name: String
    var plan: LoadPlan
    /// The origin's process when it is not nginx (measure moves it as it moves nginx).
    var origin: BenchProcess?

    static func all(origin: NginxOrigin, connections: Int, newConnectionClients: Int, http2Connections: Int) -> [Scenario] {
        func plan(_ https: Bool, host: String = "localhost", _ path: String, connections: Int, fresh: Bool = false) -> LoadPlan {
            LoadPlan(
                https: https, host: host, port: https ? origin.httpsPort : origin.httpPort, path: path, proxy: nil,
                connections: connections, duration: .seconds(1), newConnectionPerRequest: fresh, tls: nil)
        }
        return [
            Scenario(name: "plain HTTP keep-alive 1 KiB", plan: plan(false, "/1k", connections: connections)),
            Scenario(name: "MITM HTTPS keep-alive 1 KiB", plan: plan(true, "/1k", connections: connections)),
            // 127.0.0.2 is on neither proxy's interception list; direct, it is plain TLS to the origin.
            Scenario(name: "CONNECT passthrough keep-alive 1 KiB", plan: plan(true, host: "127.0.0.2", "/1k", connections: connections)),
            Scenario(
                name: "new MITM TLS connections (CONNECT + handshake + 1 request)",
                plan: plan(true, "/1k", connections: newConnectionClients, fresh: true)),
            Scenario(name: "1 MiB HTTPS download", plan: plan(true, "/1m", connections: 4)),
        ]
            + [10, 100].map { streams in
                // HTTP/2 to nginx's h2 port, intercepted by both proxies (ALPN h2 on both legs).
                var h2 = plan(true, "/1k", connections: http2Connections)
                h2.port = origin.http2Port
                h2.streams = streams
                return Scenario(name: "\(http2Prefix), \(streams) streams per connection", plan: h2)
            }
    }

    static let http2Prefix = "MITM HTTP/2 keep-alive 1 KiB"
    /// The cells where every process may use every core.
    static let everyCorePrefix = "every core: "

    /// Text messages to `WebSocketOrigin`'s echo, `window` in flight on each
    /// connection; intercepted by both proxies (wss, localhost is listed).
    static func webSocket(_ origin: WebSocketOrigin, connections: Int, window: Int) -> Scenario {
        var plan = LoadPlan(
            https: true, host: "localhost", port: origin.port, path: "/echo", proxy: nil, connections: connections, duration: .seconds(1),
            tls: nil)
        plan.webSocketWindow = window
        return Scenario(name: webSocketName(window: window), plan: plan, origin: origin.process)
    }

    static let webSocketPrefix = "MITM WebSocket 1 KiB text messages, echoed"

    static func webSocketName(window: Int) -> String { "\(webSocketPrefix), \(window) in flight per connection" }

    var isWebSocket: Bool { plan.webSocketWindow > 0 }

    /// Over HTTP/2 (direct, `h2load` measures it too, a check on this generator).
    var isHTTP2: Bool { plan.streams > 0 }
}
