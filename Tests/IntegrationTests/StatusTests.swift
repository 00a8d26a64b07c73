import Foundation
import Testing

extension ApplianceTests {
    /// `busymate status` works as a health check: 0 when all is well, 1 when
    /// something is wrong (listed under "problems"), 3 without a supervisor;
    /// it says when the SSL-proxying list is empty.
    @Test func statusExitsNonZeroWhenSomethingIsWrong() async throws {
        let appliance = try Appliance()
        try appliance.start()
        let well = try appliance.cli(["status"])
        #expect(well.status == 0, "\(well.stdout)")
        #expect(well.stdout.contains("SSL proxying the list is empty: HTTPS is passed through undecrypted"), "\(well.stdout)")
        #expect(!well.stdout.contains("problems:"))
        let json = try JSONSerialization.jsonObject(with: Data(try appliance.cli(["status", "--json"]).stdout.utf8)) as? [String: Any]
        #expect(
            json?["problems"] as? [String] == [] && json?["ssl_proxying_empty"] as? Bool == true && json?["pinned"] as? [Any] != nil,
            "\(json ?? [:])")

        // Invalid settings: the tunnel serves on with the last good ones, and status says so with 1.
        try Data("{\"proxy\": {\"listen\": [\"nine\"]}}".utf8).write(to: appliance.settingsURL)
        try waitUntil("status sees the invalid settings", timeout: 3) { try appliance.cli(["status"]).status == 1 }
        let wrong = try appliance.cli(["status"])
        #expect(wrong.stdout.contains("problems: settings.json is invalid"), "\(wrong.stdout)")
        let wrongJSON = try appliance.cli(["status", "--json"])
        #expect(wrongJSON.status == 1 && wrongJSON.stdout.contains("settings.json is invalid"))

        // No supervisor: 3, as `systemctl is-active` says of a stopped unit.
        appliance.killSupervisor()
        let gone = try appliance.cli(["status"])
        #expect(gone.status == 3 && gone.stdout.contains("supervisor   not running"), "\(gone.stdout)")
    }
}
