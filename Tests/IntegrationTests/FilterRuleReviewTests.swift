import Foundation
import Testing

/// Review (helper R): headers rules whose filter the README says reads the
/// response, or that `list` matches on the response, through the real
/// binaries. Both FAIL on the code under review.
extension ApplianceTests {
    /// README: a headers rule's filter may read the response (`~websocket`
    /// listed), its response edits apply "when it matches the exchange with
    /// its response head". A 101 never reaches the rules (only a status of
    /// 200 and up does), so a `~websocket` headers rule never applies.
    @Test func aWebSocketHeadersRuleEditsThe101() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings("""
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2},
             "rules": [{"name": "ws tag", "match": "~websocket", "action": "headers", "response": {"set": {"X-WS": "1"}}}]}
            """)
        try appliance.start()
        let client = Command.repoRoot.appendingPathComponent("tests/websocket/client.py").path
        let r = try Command.run("/usr/bin/python3", [client, "\(try appliance.proxyPort)", "ws://127.0.0.1:\(origin.port)/ws", "hi"], timeout: 20)
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try appliance.rows("the handshake row is stored") { $0.contains { ($0["url"] as? String)?.hasSuffix("/ws") == true } }
        let row = try appliance.row(rows.first { ($0["url"] as? String)?.hasSuffix("/ws") == true }?["id"])
        // `list` says the row is a WebSocket: the rule's filter matches it.
        let listed = try appliance.cli(["list", "--json", "~websocket"]).stdout
        #expect(listed.contains("/ws"), "\(listed)")
        #expect(row.headerLines("response").contains("X-WS: 1"), "\(row.headerLines("response"))")
        #expect(row["rule"] as? String == "ws tag", "\(row["rule"] ?? "nil")")
    }

    /// `~h` and `~t` read either message in `list` (and in mitmproxy's
    /// response hook); in a headers rule they are decided on the request
    /// alone, so a rule on the response's Content-Type written `~t`/`~h`
    /// never applies, while `list` with the same filter selects the row.
    @Test func aHeadersRuleWithAnEitherSideHeaderClauseSeesTheResponse() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings("""
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2},
             "rules": [{"name": "plain tag", "match": "~t text/plain", "action": "headers", "response": {"set": {"X-Plain": "1"}}}]}
            """)
        try appliance.start()
        let r = try Command.run("/usr/bin/curl", ["-sS", "-i", "--max-time", "10", "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                                                  "http://127.0.0.1:\(origin.port)/plain"])
        #expect(r.stdout.contains("Content-Type: text/plain"), "\(r.stdout)")
        _ = try appliance.rows("the exchange is stored") { !$0.isEmpty }
        let listed = try appliance.cli(["list", "--json", "~t text/plain"]).stdout
        #expect(listed.contains("/plain"), "\(listed)")
        #expect(r.stdout.contains("X-Plain: 1\r\n"), "\(r.stdout)")
    }
}

extension ApplianceTests {
    /// A passed-through tunnel's row holds the CONNECT's headers, and `list`
    /// matches `~hq` on them; the host_override rule's filter is given none
    /// (`ProxyPipeline.passThroughOverride`), so the same filter does not
    /// pick the tunnel. FAILS on the code under review.
    @Test func aHostOverrideFilterOnTheConnectsHeadersPicksThePassedThroughTunnel() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings("""
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2},
             "rules": [{"name": "to origin", "match": "~hq \\"x-route: origin\\"", "action": "host_override", "address": "127.0.0.1"}]}
            """)
        try appliance.start()
        // nowhere.invalid does not resolve: only the override can reach the origin.
        let r = try Command.run("/usr/bin/curl", ["-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                                                  "-x", "http://127.0.0.1:\(try appliance.proxyPort)", "--proxy-header", "X-Route: origin",
                                                  "https://nowhere.invalid:\(origin.port)/plain"])
        let rows = try appliance.rows("the tunnel row is stored", timeout: 8) { $0.contains { ($0["host"] as? String) == "nowhere.invalid" } }
        let listed = try appliance.cli(["list", "--json", "~hq \"x-route: origin\""]).stdout
        #expect(listed.contains("nowhere.invalid"), "\(listed)")
        #expect(r.stdout == "200", "curl: \(r.stdout) \(r.stderr); rows: \(rows.map { $0["rule"] ?? "nil" })")
    }
}
