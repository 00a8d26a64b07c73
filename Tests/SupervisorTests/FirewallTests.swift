import BusymateShared
import Foundation
import Testing

@testable import Supervisor

@Suite struct FirewallTests {
    func settings(_ text: String) throws -> AppSettings { try AppSettings.decode(text).settings }

    @Test func theTableRedirectsAndSparesTheTunnel() throws {
        let script = Firewall.script(
            try settings(
                """
                {"mode": "transparent", "transparent": {"port": 9180, "ports": [80, 443], "interfaces": ["eth1", "wlan0"]}, "dns": {"port": 9153}}
                """), tunnelUID: 999, table: "busymate-0a1b2c3d")
        // Replaced whole, in one transaction.
        #expect(script.hasPrefix("table inet busymate-0a1b2c3d\ndelete table inet busymate-0a1b2c3d\ntable inet busymate-0a1b2c3d {\n"))
        #expect(script.contains("meta skuid 999 return"))
        #expect(script.contains("meta l4proto tcp th dport { 80, 443 } redirect to :9180"))
        #expect(script.contains("meta l4proto { tcp, udp } th dport 53 redirect to :9153"))
        #expect(script.contains("iifname { \"eth1\", \"wlan0\" } meta l4proto tcp th dport { 80, 443 } redirect to :9180"))
        #expect(script.contains("udp dport 443 counter name \"quic\" reject"))
        #expect(script.contains("hook prerouting") && script.contains("hook forward"))
        // DNS to the gateway itself is captured; other traffic to it is not.
        let prerouting = script.components(separatedBy: "chain prerouting_nat")[1]
        let dns = try #require(prerouting.range(of: "th dport 53 redirect"))
        let local = try #require(prerouting.range(of: "fib daddr type local return"))
        #expect(dns.lowerBound < local.lowerBound)
    }

    @Test func withNoInterfacesOnlyThisMachineIsCaptured() throws {
        let script = Firewall.script(try settings("{\"mode\": \"transparent\"}"), tunnelUID: 0, table: "busymate-0a1b2c3d")
        #expect(!script.contains("prerouting") && !script.contains("forward"))
        #expect(script.contains("hook output"))
    }

    /// Two appliances never share a table; the same directory, however
    /// reached, always finds its own (a restart replaces it).
    @Test func eachGroupDirectoryHasATableOfItsOwn() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("bm-fw-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: base) }
        let one = base.appendingPathComponent("one"), two = base.appendingPathComponent("two"), link = base.appendingPathComponent("link")
        try FileManager.default.createDirectory(at: one, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: two, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: one)
        let name = Firewall.table(for: one)
        #expect(name.hasPrefix("busymate-") && name.count == "busymate-".count + 8)
        #expect(name.dropFirst("busymate-".count).allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(Firewall.table(for: one) == name)
        #expect(Firewall.table(for: link) == name)
        #expect(Firewall.table(for: one.appendingPathComponent("..").appendingPathComponent("one")) == name)
        #expect(Firewall.table(for: two) != name)
    }

    /// `nft --check` parses the script against the kernel without applying it.
    @Test func nftAcceptsTheScript() throws {
        guard getuid() == 0, let nft = Firewall.nftPath() else {
            print("SKIPPED nftAcceptsTheScript: needs root and nft")
            return
        }
        let script = Firewall.script(
            try settings(
                """
                {"mode": "transparent", "transparent": {"ports": [80, 443, 8080], "interfaces": ["eth1"]}}
                """), tunnelUID: 999, table: Firewall.table(for: URL(fileURLWithPath: "/var/lib/busymate/group")))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: nft)
        process.arguments = ["--check", "-f", "-"]
        let input = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardError = errors
        try process.runSerialized()
        input.fileHandleForWriting.write(Data(script.utf8))
        try input.fileHandleForWriting.close()
        process.waitForExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0, "\(stderr)\n\(script)")
    }
}
