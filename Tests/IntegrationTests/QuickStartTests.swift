import Foundation
import Testing

extension ApplianceTests {
    /// README's quick start, as a user types it: `ssl-proxying add HOST`,
    /// then at once a curl that trusts the group's CA. The command returns
    /// once the tunnel has the host on its list, so that very request is
    /// decrypted (it was passed through, a race the user lost every time).
    @Test func aHostAddedFromTheCLIIsInterceptedByTheVeryNextRequest() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(Appliance.interceptionSettings(include: [], trust: try appliance.trust(origin)))
        try appliance.start()
        let port = try appliance.proxyPort
        for (round, host) in ["localhost", "127.0.0.1"].enumerated() {
            // One shell line, as typed: nothing between the two commands.
            let line =
                "'\(Command.binary("busymate"))' ssl-proxying add \(host) --group '\(appliance.group.path)' >/dev/null && "
                + "curl -sS --cacert '\(appliance.caFile.path)' -x http://127.0.0.1:\(port) -w '\\n%{http_code}' https://\(host):\(origin.port)/first-\(round)"
            let r = try Command.run("/bin/sh", ["-c", line])
            #expect(r.stdout.hasSuffix("origin GET /first-\(round)\n\n200"), "\(host): \(r.stdout) \(r.stderr)")
        }
        let rows = try appliance.rows("both are stored") { $0.filter { ($0["url"] as? String)?.contains("/first-") == true }.count == 2 }
        #expect(
            rows.filter { ($0["url"] as? String)?.contains("/first-") == true }.allSatisfy { $0["tls"] as? String == "mitm" }, "\(rows)")
    }
}
