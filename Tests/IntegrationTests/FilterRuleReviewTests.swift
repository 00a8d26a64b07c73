import Foundation
import Testing

/// Review (helper R): filter rules against what `list` selects with the
/// same filter, through the real binaries; each failed before its fix.
extension ApplianceTests {
    /// A 101 switch never reaches the rules' response edits (nor a breakpoint):
    /// a `~websocket` rule could never apply, so it is refused with what to
    /// write instead, and a handshake rule on the request does apply.
    @Test func aWebSocketRuleIsRefusedAndAHandshakeRuleApplies() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.start()
        let refused = try appliance.cli([
            "rules", "add", "ws tag", "--match", "~websocket", "--action", "headers", "--set-header", "X-WS: 1",
            "--on", "response",
        ])
        #expect(refused.status != 0 && refused.stderr.contains("a 101 switch is neither edited nor held"), "\(refused.stderr)")
        let added = try appliance.cli([
            "rules", "add", "ws tag", "--match", #"~hq "upgrade: websocket""#, "--action", "headers",
            "--set-header", "X-WS: 1",
        ])
        #expect(added.status == 0, "\(added.stderr)")
        let client = Command.repoRoot.appendingPathComponent("tests/websocket/client.py").path
        let r = try Command.run(
            "/usr/bin/python3", [client, "\(try appliance.proxyPort)", "ws://127.0.0.1:\(origin.port)/ws", "hi"], timeout: 20)
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try appliance.rows("the handshake row is stored") { $0.contains { ($0["url"] as? String)?.hasSuffix("/ws") == true } }
        let row = try appliance.row(rows.first { ($0["url"] as? String)?.hasSuffix("/ws") == true }?["id"])
        #expect(row.headerLines("request").contains("X-WS: 1"), "\(row.headerLines("request"))")
        #expect(row["rule"] as? String == "ws tag", "\(row["rule"] ?? "nil")")
    }

    /// `~h` and `~t` read either message in `list` (and in mitmproxy's
    /// response hook): a headers rule with them is decided again at the
    /// response head, so one on the response's Content-Type applies.
    @Test func aHeadersRuleWithAnEitherSideHeaderClauseSeesTheResponse() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2},
             "rules": [{"name": "plain tag", "match": "~t text/plain", "action": "headers", "response": {"set": {"X-Plain": "1"}}}]}
            """)
        try appliance.start()
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-i", "--max-time", "10", "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                "http://127.0.0.1:\(origin.port)/plain",
            ])
        #expect(r.stdout.contains("Content-Type: text/plain"), "\(r.stdout)")
        _ = try appliance.rows("the exchange is stored") { !$0.isEmpty }
        let listed = try appliance.cli(["list", "--json", "~t text/plain"]).stdout
        #expect(listed.contains("/plain"), "\(listed)")
        #expect(r.stdout.contains("X-Plain: 1\r\n"), "\(r.stdout)")
    }
}

extension ApplianceTests {
    /// A passed-through tunnel's row holds the CONNECT's headers, and `list`
    /// matches `~hq` on them; the host_override rule's filter reads them too.
    @Test func aHostOverrideFilterOnTheConnectsHeadersPicksThePassedThroughTunnel() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(
            """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "tunnel": {"drain_seconds": 2},
             "rules": [{"name": "to origin", "match": "~hq \\"x-route: origin\\"", "action": "host_override", "address": "127.0.0.1"}]}
            """)
        try appliance.start()
        // nowhere.invalid does not resolve: only the override can reach the origin.
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                "-x", "http://127.0.0.1:\(try appliance.proxyPort)", "--proxy-header", "X-Route: origin",
                "https://nowhere.invalid:\(origin.port)/plain",
            ])
        let rows = try appliance.rows("the tunnel row is stored", timeout: 8) {
            $0.contains { ($0["host"] as? String) == "nowhere.invalid" }
        }
        let listed = try appliance.cli(["list", "--json", "~hq \"x-route: origin\""]).stdout
        #expect(listed.contains("nowhere.invalid"), "\(listed)")
        #expect(r.stdout == "200", "curl: \(r.stdout) \(r.stderr); rows: \(rows.map { $0["rule"] ?? "nil" })")
    }
}
