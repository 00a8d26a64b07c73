import BusymateShared
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Holes found by probing from outside: what a member of group busymate, a
/// stranger or a planted file must not be able to do.
@Suite(.serialized) struct SecurityTests {
    private func uid(of pid: Int32) -> String? {
        ProcessProbe.status(pid)["Uid"]?.split(whereSeparator: { $0 == "\t" || $0 == " " }).first.map(String.init)
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func settingsJSONCannotChooseWhomTheTunnelRunsAs() async throws {
        // A group member writes settings.json (0664): it must not pick the user.
        let appliance = try Appliance(settings: """
            {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]},
             "tunnel": {"user": "nobody", "group": "nogroup", "drain_seconds": 2}}

            """)
        try appliance.start()
        let busymate = "\(PrivilegeDrop.lookupUser("busymate") ?? 0)"
        let first = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: first) == busymate)
        let restart = try appliance.cli(["tunnel", "restart"])
        #expect(restart.status == 0, "\(restart.stderr)")
        try waitUntil("the new tunnel is ready", timeout: 10) {
            let s = try appliance.status()
            return s.int("tunnel.pid").map(Int32.init) != first && s.string("tunnel.state") == "ready"
        }
        let second = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: second) == busymate)
        let unknown = try appliance.status().value("settings.unknown_keys") as? [String] ?? []
        #expect(unknown.contains("tunnel.user") && unknown.contains("tunnel.group"), "\(unknown)")
        #expect(appliance.log.contains("settings.json's tunnel.user is ignored"), "\(appliance.log)")
    }

    @Test(.enabled(if: geteuid() == 0, "the privilege drop needs root"))
    func theSupervisorsCommandLineChoosesWhomTheTunnelRunsAs() async throws {
        let appliance = try Appliance()
        // Group busymate, so that it can still reach control.sock and the store.
        appliance.supervisorArguments = ["--tunnel-user", "nobody", "--tunnel-group", "busymate"]
        try appliance.start()
        let pid = Int32(try appliance.status().int("tunnel.pid") ?? 0)
        #expect(uid(of: pid) == "\(PrivilegeDrop.lookupUser("nobody") ?? 0)")
        let bad = try Command.run(Command.binary("busymate-app"), ["--tunnel-user", "-x", "--group", appliance.base.appendingPathComponent("other").path])
        #expect(bad.status == 64 && bad.stderr.contains("--tunnel-user needs a user or group name"), "\(bad.stderr)")
    }
}
