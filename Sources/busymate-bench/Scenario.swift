import NIOCore

/// One row of the table.
struct Scenario {
    let name: String
    var plan: LoadPlan

    static func all(origin: NginxOrigin, connections: Int, newConnectionClients: Int) -> [Scenario] {
        func plan(_ https: Bool, host: String = "localhost", _ path: String, connections: Int, fresh: Bool = false) -> LoadPlan {
            LoadPlan(https: https, host: host, port: https ? origin.httpsPort : origin.httpPort, path: path, proxy: nil,
                     connections: connections, duration: .seconds(1), newConnectionPerRequest: fresh, tls: nil)
        }
        return [
            Scenario(name: "plain HTTP keep-alive 1 KiB", plan: plan(false, "/1k", connections: connections)),
            Scenario(name: "MITM HTTPS keep-alive 1 KiB", plan: plan(true, "/1k", connections: connections)),
            // 127.0.0.2 is on neither proxy's interception list; direct, it is plain TLS to the origin.
            Scenario(name: "CONNECT passthrough keep-alive 1 KiB", plan: plan(true, host: "127.0.0.2", "/1k", connections: connections)),
            Scenario(name: "new MITM TLS connections (CONNECT + handshake + 1 request)", plan: plan(true, "/1k", connections: newConnectionClients, fresh: true)),
            Scenario(name: "1 MiB HTTPS download", plan: plan(true, "/1m", connections: 4)),
        ]
    }
}
