import BusymateShared
import Foundation
import Testing

/// The timeouts of settings.json, end to end with clients that dawdle.
@Suite(.serialized) struct TimeoutTests {
    struct SlowReply: Decodable {
        var text: String
        var closed: Bool
        var seconds: Double
    }

    static func slow(_ port: Int, _ request: String, drip: Double = 0, limit: Double = 15, tlsConnect: String? = nil) throws -> SlowReply {
        let hex = Array(request.utf8).map { String(format: "%02x", $0) }.joined()
        var args = [HostileClientTests.scripts.appendingPathComponent("slow.py").path, "\(port)", hex, "\(drip)", "\(limit)"]
        if let tlsConnect { args += ["--tls-connect", tlsConnect] }
        let r = try Command.run("/usr/bin/python3", args, timeout: limit + 10)
        return try JSONDecoder().decode(SlowReply.self, from: Data(r.stdout.utf8))
    }

    static let settings = """
        {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2},
         "ssl_proxying": {"include": ["localhost"], "insecure_upstream": ["localhost"]},
         "timeouts": {"request_head_seconds": 1, "idle_seconds": 1.5, "body_seconds": 1, "tls_handshake_seconds": 1, "upstream_response_seconds": 1}}

        """

    @Test func slowlorisAndSilentClientsAreClosed() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.settings)
        try appliance.start()
        let port = try appliance.proxyPort

        // One header byte every 0.3 s: the head is not whole within 1 s.
        let drip = try Self.slow(
            port, "GET http://127.0.0.1:\(origin.port)/ HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaa\r\n\r\n", drip: 0.3)
        #expect(drip.text.hasPrefix("HTTP/1.1 408 Request Timeout"), "\(drip.text)")
        #expect(drip.text.contains("the request head did not arrive whole within 1 s (timeouts.request_head_seconds)"))
        #expect(drip.closed && drip.seconds < 3, "\(drip.seconds)")

        // A connection that says nothing at all is closed without a word.
        let silent = try Self.slow(port, "")
        #expect(silent.closed && silent.text.isEmpty && silent.seconds < 3, "\(silent)")

        // A kept-alive connection with nothing in flight: idle_seconds.
        let idle = try Self.slow(port, "GET http://127.0.0.1:\(origin.port)/one HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(idle.text.hasPrefix("HTTP/1.1 200") && idle.closed && idle.seconds >= 1.4 && idle.seconds < 4, "\(idle)")

        // A body that stops: 408, and the exchange's row says why.
        let body = try Self.slow(
            port, "POST http://127.0.0.1:\(origin.port)/echo-body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
        #expect(body.text.hasPrefix("HTTP/1.1 408 Request Timeout"), "\(body.text)")
        #expect(body.closed && body.seconds < 4)

        let rows = try appliance.rows(
            "both timeouts are recorded",
            until: { rows in
                rows.contains { ($0["error"] as? String)?.contains("timeouts.request_head_seconds") == true }
                    && rows.contains { ($0["error"] as? String)?.contains("timeouts.body_seconds") == true }
            })
        let bodyRow = try #require(rows.first { ($0["error"] as? String)?.contains("timeouts.body_seconds") == true })
        #expect(bodyRow["method"] as? String == "POST" && bodyRow["status"] as? Int == 408)
        #expect(appliance.log.contains("closed an idle connection"))
    }

    @Test func aServerThatDoesNotAnswerGets504() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.settings)
        try appliance.start()
        let slow = try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/slow?ms=4000")
        #expect(slow.code == 504)
        #expect(slow.body.contains("sent no response within 1 s of the request (timeouts.upstream_response_seconds)"), "\(slow.body)")
        let rows = try appliance.rows(
            "the 504 is recorded", until: { $0.contains { ($0["error"] as? String)?.contains("upstream_response_seconds") == true } })
        #expect(rows.count == 1)
        // A server that answers in time is not cut short.
        #expect(try Command.curl(proxyPort: try appliance.proxyPort, "http://127.0.0.1:\(origin.port)/slow?ms=300").code == 200)
    }

    @Test func aTLSHandshakeThatNeverStartsIsClosedAndNothingIsPinned() async throws {
        let tlsOrigin = try await Origin.tls()
        defer { Task { await tlsOrigin.stop() } }
        let appliance = try Appliance(settings: Self.settings)
        try appliance.start()
        let port = try appliance.proxyPort
        let stalled = try Self.slow(port, "", tlsConnect: "localhost:\(tlsOrigin.port)")
        #expect(stalled.closed && stalled.seconds < 3, "\(stalled)")
        let rows = try appliance.rows(
            "the handshake timeout is recorded",
            until: { $0.contains { ($0["error"] as? String)?.contains("timeouts.tls_handshake_seconds") == true } })
        #expect(rows.count == 1)
        #expect(try appliance.cli(["pinned", "list"]).stdout.contains("localhost") == false)
        // The host is still intercepted.
        let r = try Command.run(
            "/usr/bin/curl",
            ["-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/after"])
        #expect(r.status == 0 && r.stdout.contains("origin GET /after"), "\(r.stderr)")
    }

    @Test func anIdlePassedThroughTunnelIsClosedAndCounted() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2}, "timeouts": {"tunnel_idle_seconds": 2}}

                """)
        try appliance.start()
        // Busy for 4.8 s (more than the idle limit in all), then silent.
        let r = try Command.run(
            "/usr/bin/python3",
            [
                HostileClientTests.scripts.appendingPathComponent("tunnel.py").path,
                "\(try appliance.proxyPort)", "127.0.0.1:\(origin.port)", "5", "1.2", "10",
            ], timeout: 30)
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout) \(r.stderr)")
        #expect((reply["established"] as? String)?.hasPrefix("HTTP/1.1 200") == true, "\(reply)")
        #expect(reply["answered"] as? Int == 5, "a tunnel in use is not cut: \(reply)")
        let idle = reply["idle_seconds"] as? Double ?? 0
        #expect(reply["closed"] as? Bool == true && idle >= 1.8 && idle < 4, "closed after 2 s of silence: \(reply)")
        try waitUntil("the closure is counted", timeout: 3) { try appliance.status().int("counters.tunnels_idle_closed") == 1 }
        #expect(appliance.log.contains("closed an idle tunnel"))
    }

    @Test func manyIdleConnectionsAreAllClosed() async throws {
        let appliance = try Appliance(settings: Self.settings)
        try appliance.start()
        let port = try appliance.proxyPort
        // As many as this machine lets one client hold (about a hundred).
        let flood = try Command.start(
            "/usr/bin/python3", [HostileClientTests.scripts.appendingPathComponent("flood.py").path, "\(port)", "100", "5"],
            in: appliance.base)
        defer { flood.process.terminate() }
        try waitUntil("the flood is connected", timeout: 10) { !flood.stdout.isEmpty }
        let connected = Int(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(connected >= 50)
        try waitUntil("the tunnel holds them", timeout: 3) { (try appliance.status().int("counters.connections_active") ?? 0) >= 50 }
        try waitUntil("the tunnel has closed them all", timeout: 4) {
            (try appliance.status().int("counters.connections_active") ?? 99) == 0
        }
    }
}
