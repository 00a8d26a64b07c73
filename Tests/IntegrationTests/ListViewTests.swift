import Foundation
import Testing

extension ApplianceTests {
    /// `busymate list` on an 80-column terminal: the URL stays whole beside
    /// a long error (the error takes a line of its own), and a row says
    /// which rule applied and that it was resent, as the flags do.
    @Test func anEightyColumnListKeepsTheURLAndSaysWhichRuleApplied() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        #expect(try appliance.cli(["rules", "add", "gate-keeper", "--match", "*/gated", "--action", "block"]).status == 0)
        try waitUntil("the rule is in force", timeout: 5) { try Command.curl(proxyPort: port, "\(base)/gated").code == 403 }
        _ = try Command.curl(proxyPort: port, "\(base)/break")
        let rows = try appliance.rows("both are stored") { rows in rows.contains { ($0["url"] as? String)?.hasSuffix("/break") == true } }
        let broken = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/break") == true })
        #expect((broken["error"] as? String)?.count ?? 0 > 30, "\(broken)")
        if let id = rows.first(where: { ($0["url"] as? String)?.hasSuffix("/gated") == true })?["id"] as? Int {
            #expect(try appliance.cli(["resend", String(id)]).status == 0)
        }
        _ = try appliance.rows("the resend is stored") { rows in rows.contains { $0["resent_from"] is Int } }

        // A real terminal of 80 columns (script(1) gives the CLI a pty).
        let cli = Command.binary("busymate")
        let shell = "stty cols 80 rows 50; NO_COLOR=1 '\(cli)' list --group '\(appliance.group.path)'"
        let r = try Command.run("/usr/bin/script", ["-qec", shell, "/dev/null"])
        let lines = r.stdout.replacingOccurrences(of: "\r", with: "").split(separator: "\n").map(String.init)
        #expect(lines.allSatisfy { $0.count <= 80 }, "\(lines)")
        // The URL of the failed exchange is whole, and its error on the next line.
        let at = try #require(lines.firstIndex { $0.hasSuffix("\(base)/break") }, "\(lines)")
        #expect(lines.indices.contains(at + 1) && lines[at + 1].trimmingCharacters(in: .whitespaces).hasPrefix("! "), "\(lines)")
        // The blocked one says which rule; the resent one that it was resent.
        // Beside the URL when it fits, else on the line under it.
        let notes = lines.indices.filter { lines[$0].contains("\(base)/gated") }.map { i in
            lines[i] + (lines.indices.contains(i + 1) && lines[i + 1].hasPrefix(" ") ? lines[i + 1] : "")
        }
        #expect(notes.contains { $0.contains("rule gate-keeper") && !$0.contains("resent") }, "\(lines)")
        #expect(notes.contains { $0.contains("rule gate-keeper · resent") }, "\(lines)")
        // To a pipe every line is whole: URL, then the note.
        let piped = try appliance.cli(["list"]).stdout
        #expect(piped.contains("\(base)/break  ! "), "\(piped)")
    }
}

extension ApplianceTests {
    /// Every error the CLI prints starts `busymate:`, usage errors too; a
    /// group no supervisor serves says how to name the right one.
    @Test func everyErrorStartsBusymateAndAStrayGroupIsNamed() throws {
        let cli = Command.binary("busymate")
        let stray = FileManager.default.temporaryDirectory.appendingPathComponent("bm-stray-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: stray) }
        for arguments in [
            ["frob"], ["show", "--group", stray.path], ["list", "--group", stray.path], ["list", "~c 4x5", "--group", stray.path],
            ["mark", "--group", stray.path],
        ] {
            let r = try Command.run(cli, arguments)
            #expect(r.status != 0 && r.stderr.hasPrefix("busymate: ") && !r.stderr.contains("Error:"), "\(arguments): \(r.stderr)")
        }
        let status = try Command.run(cli, ["status", "--group", stray.path])
        #expect(status.status == 3 && status.stderr.isEmpty, "\(status)")
        #expect(
            status.stdout.contains("hint: no supervisor serves this group") && status.stdout.contains("BUSYMATE_GROUP=DIR")
                && status.stdout.contains("(--group)"), "\(status.stdout)")
        let viaEnvironment = try Command.run(cli, ["status"], environment: ["BUSYMATE_GROUP": stray.path, "PATH": "/usr/bin:/bin"])
        #expect(viaEnvironment.stdout.contains("($BUSYMATE_GROUP)"), "\(viaEnvironment.stdout)")
    }
}
