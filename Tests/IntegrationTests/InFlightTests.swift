import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension ApplianceTests {
    /// Exchanges in flight and held at a breakpoint are visible before they
    /// are stored: in `list` (with how long), in `status`, and in `tail` as
    /// they start; once done, they are ordinary rows.
    @Test func exchangesInFlightAndHeldAreVisible() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]},
                 "breakpoints": {"request": ["127.0.0.1:\(origin.port)/echo-body/held*"], "timeout_seconds": 30}}

                """)
        try appliance.start()
        let base = "http://127.0.0.1:\(origin.port)"
        let tail = try Command.start(Command.binary("busymate"), ["tail", "--group", appliance.group.path], in: appliance.base)
        defer {
            kill(tail.process.processIdentifier, SIGTERM)
            tail.process.waitForExit()
        }
        try waitUntil("tail listens", timeout: 3) {
            try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path).contains {
                $0.hasPrefix("cli-")
            }
        }

        let slow = try appliance.startCurl(["\(base)/slow?ms=4000"])
        let held = try appliance.startCurl(["-d", "x=1", "\(base)/echo-body/held"])
        defer {
            slow.process.terminate()
            held.process.terminate()
        }
        var table: [String] = []
        try waitUntil("list shows both open", timeout: 3) {
            table = try appliance.cli(["list"]).stdout.split(separator: "\n").map(String.init)
            return table.contains { $0.hasSuffix("/slow?ms=4000") } && table.contains { $0.hasSuffix("/echo-body/held") }
        }
        let slowLine = try #require(table.first { $0.hasSuffix("/slow?ms=4000") })
        #expect(
            slowLine.contains(" GET ") && slowLine.contains(" … ") && (slowLine.hasPrefix(" -") || slowLine.hasPrefix("- ")), "\(slowLine)")
        let heldLine = try #require(table.first { $0.hasSuffix("/echo-body/held") })
        #expect(heldLine.contains(" held ") && heldLine.contains(" B "), "\(heldLine)")
        // How long: a duration that grows.
        #expect(slowLine.range(of: #" \d+ms | \d+\.\ds "#, options: .regularExpression) != nil, "\(slowLine)")

        let status = try appliance.cli(["status"])
        #expect(status.stdout.contains("in flight    2 exchanges"), "\(status.stdout)")
        try waitUntil("status counts the held one", timeout: 2) { try appliance.cli(["status"]).stdout.contains("breakpoints  1 held") }
        let json = try JSONSerialization.jsonObject(with: Data(try appliance.cli(["status", "--json"]).stdout.utf8)) as? [String: Any]
        #expect(json?["in_flight"] as? Int == 2)
        // tail saw them start, before either was stored.
        #expect(tail.stdout.contains("→ GET \(base)/slow?ms=4000 (started, in flight)"), "\(tail.stdout)")
        #expect(tail.stdout.contains("→ POST \(base)/echo-body/held (started, in flight)"), "\(tail.stdout)")
        #expect(try appliance.rows().isEmpty)

        // Done: stored rows, and nothing in flight.
        #expect(try appliance.cli(["breakpoints", "continue", "\(try appliance.held(1).first?["id"] as? Int ?? 0)"]).status == 0)
        slow.process.waitForExit()
        held.process.waitForExit()
        _ = try appliance.rows("both are stored") { $0.count == 2 }
        try waitUntil("nothing is in flight", timeout: 3) {
            let json = try JSONSerialization.jsonObject(with: Data(try appliance.cli(["status", "--json"]).stdout.utf8)) as? [String: Any]
            return json?["in_flight"] as? Int == 0
        }
        #expect(!(try appliance.cli(["list"]).stdout.contains(" … ")))
    }
}
