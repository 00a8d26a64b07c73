import Foundation
import Testing

/// Protocol switches and interim answers through the real binaries:
/// WebSocket (plain and intercepted) and `Expect: 100-continue`.
extension ApplianceTests {
    private func websocket(_ port: Int, _ url: String, _ message: String, ca: URL? = nil) throws -> CommandResult {
        let client = Command.repoRoot.appendingPathComponent("tests/websocket/client.py").path
        return try Command.run("/usr/bin/python3", [client, "\(port)", url, message] + (ca.map { [$0.path] } ?? []), timeout: 20)
    }

    private func handshakeRow(_ appliance: Appliance, suffix: String) throws -> [String: Any] {
        // The row is written at the 101; its end (and its byte counts) at the close.
        let rows = try appliance.rows("the handshake row is stored and ended") {
            $0.contains { ($0["url"] as? String)?.hasSuffix(suffix) == true && $0["duration_ms"] is Int }
        }
        return try appliance.row(rows.first { ($0["url"] as? String)?.hasSuffix(suffix) == true }?["id"])
    }

    @Test func aWebSocketIsPassedThroughAfterThe101AndItsHandshakeRecorded() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort

        let r = try websocket(port, "ws://127.0.0.1:\(origin.port)/ws", "hello through busymate")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "HTTP/1.1 101 Switching Protocols\nhello through busymate\n", "\(r.stdout)")
        let row = try handshakeRow(appliance, suffix: "/ws")
        #expect(row["status"] as? Int == 101)
        let request = row.headerLines("request").joined(separator: "\n")
        #expect(request.contains("Sec-WebSocket-Key") && request.contains("websocket"), "\(request)")
        #expect(row.headerLines("response").contains { $0.hasPrefix("Sec-WebSocket-Accept: ") })
        // Frames went both ways: a masked frame up (6 + 22 bytes), its echo down.
        #expect((row["bytes_up"] as? Int ?? 0) >= 28, "\(row)")
        #expect((row["bytes_down"] as? Int ?? 0) >= 24, "\(row)")
        #expect(row["error"] is NSNull)
        // The tunnel is still an HTTP proxy for everyone else.
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
    }

    @Test func anInterceptedWebSocketIsDecryptedAndPassedThrough() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.intercepting(origin)
        let port = try appliance.proxyPort

        let r = try websocket(port, "wss://localhost:\(origin.port)/ws", "secret frames", ca: appliance.caFile)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "HTTP/1.1 101 Switching Protocols\nsecret frames\n", "\(r.stdout)")
        let row = try handshakeRow(appliance, suffix: "/ws")
        #expect(row["status"] as? Int == 101)
        #expect(row["tls"] as? String == "mitm")
        #expect((row["bytes_up"] as? Int ?? 0) >= 19)
    }

    @Test func expect100ContinueIsAnsweredByTheOriginThroughTheProxy() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        // curl waits for the 100 (here up to 10 s) before it sends the body.
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-v", "-o", "/dev/null", "-w", "%{http_code}", "--expect100-timeout", "10",
                "-x", "http://127.0.0.1:\(port)", "-H", "Expect: 100-continue",
                "--data-binary", String(repeating: "x", count: 2000), "http://127.0.0.1:\(origin.port)/upload",
            ])
        #expect(r.stdout == "200", "\(r.stderr)")
        #expect(r.stderr.contains("< HTTP/1.1 100 Continue"), "\(r.stderr)")
        let rows = try appliance.rows("the exchange is stored") { !$0.isEmpty }
        #expect(rows.first?["status"] as? Int == 200)
    }
}
