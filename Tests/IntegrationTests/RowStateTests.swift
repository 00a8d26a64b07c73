import Foundation
import Testing

/// Issue 22: `busymate list` states each row as it is: a passed-through
/// tunnel that closed is not "still open", and an exchange already stored
/// is not listed again as in flight.
extension ApplianceTests {
    @Test func aClosedPassedThroughTunnelIsNotListedAsOpen() async throws {
        let tlsOrigin = try await Origin.tls()
        defer { Task { await tlsOrigin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let originCA = try appliance.trust(tlsOrigin)
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", originCA.path, "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                "https://localhost:\(tlsOrigin.port)/through",
            ])
        #expect(r.status == 0, "\(r.stderr)")
        let rows = try appliance.rows("the tunnel's row is stored") { $0.contains { $0["method"] as? String == "CONNECT" } }
        let tunnel = try #require(rows.first { $0["method"] as? String == "CONNECT" })
        // The client was told "200 Connection established".
        #expect(tunnel["status"] as? Int == 200 && tunnel["tls"] as? String == "passthrough", "\(tunnel)")
        let listed = try appliance.cli(["list"]).stdout.split(separator: "\n").first { $0.contains("CONNECT") }.map(String.init) ?? ""
        let cells = listed.split(separator: " ", omittingEmptySubsequences: true)
        #expect(cells.count > 3 && cells[3] == "200" && !listed.contains("…"), "\(listed)")
    }

    @Test func aStoredExchangeIsNotAlsoListedInFlight() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        var ghosts: [String] = []
        for i in 0..<12 {
            // Long enough that open-exchanges.json (written 4 times a second) lists it while open.
            let url = "http://127.0.0.1:\(origin.port)/slow?ms=300"
            #expect(try appliance.curl(url).code == 200)
            _ = try appliance.rows("request \(i) is stored") { $0.count == i + 1 }
            let out = try appliance.cli(["list", "--limit", "1"]).stdout
            let lines = out.split(separator: "\n").dropFirst()
            if lines.contains(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("- ") }) || lines.count != 1 { ghosts.append(out) }
        }
        #expect(ghosts.isEmpty, "\(ghosts.count) lists showed a stored exchange in flight too:\n\(ghosts.joined(separator: "\n"))")
    }
}
