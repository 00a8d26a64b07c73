import Foundation
import Testing

extension ApplianceTests {
    /// Header edits from `rules add` flags, and an origin's own CA from
    /// `ssl-proxying trust-upstream`, each in force for the next request.
    @Test func headerFlagsAndAnUpstreamCAFromTheCLI() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Appliance.interceptionSettings(include: ["localhost"]))
        try appliance.start()
        let port = try appliance.proxyPort
        func get(_ path: String, headers: Bool = false) throws -> (code: String, text: String) {
            let r = try Command.run(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)", "-A", "curl-test",
                    headers ? "-i" : "-s", "-w", "\n%{http_code}", "https://localhost:\(origin.port)\(path)",
                ])
            let parts = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(parts.last ?? ""), parts.dropLast().joined(separator: "\n"))
        }
        // The origin's self-signed certificate: refused until its CA is trusted.
        #expect(try get("/a").code == "502")
        let pem = try appliance.trust(origin)
        let trusted = try appliance.cli(["ssl-proxying", "trust-upstream", pem.path])
        #expect(trusted.status == 0 && trusted.stdout.contains(pem.path), "\(trusted)")
        #expect(try get("/a").code == "200")

        let added = try appliance.cli([
            "rules", "add", "staging", "--match", "*/echo-headers", "--action", "headers",
            "--set-header", "X-Env: staging", "--remove-header", "User-Agent",
        ])
        #expect(added.status == 0, "\(added)")
        let echoed = try get("/echo-headers")
        #expect(
            echoed.code == "200" && echoed.text.lowercased().contains("x-env: staging") && !echoed.text.lowercased().contains("user-agent"),
            "\(echoed)")
        // One headers rule applies per request (the first): this one matches another path.
        #expect(
            try appliance.cli([
                "rules", "add", "tag", "--match", "*/tagged", "--action", "headers", "--on", "response",
                "--add-header", "X-Seen: busymate",
            ]).status == 0)
        #expect(try get("/tagged", headers: true).text.lowercased().contains("x-seen: busymate"))
        // Refused before anything is written, naming the flag.
        let bad = try appliance.cli(["rules", "add", "bad", "--match", "*", "--action", "headers", "--set-header", "no-colon"])
        #expect(bad.status != 0 && bad.stderr.contains("--set-header no-colon"), "\(bad)")
        let twice = try appliance.cli([
            "rules", "add", "bad", "--match", "*", "--action", "headers", "--add-header", "A: 1", "--add-header", "a: 2",
        ])
        #expect(twice.status != 0 && twice.stderr.contains("twice"), "\(twice)")

        #expect(try appliance.cli(["ssl-proxying", "trust-upstream", "--remove"]).status == 0)
        #expect(try get("/a").code == "502")
        let notPEM = try appliance.cli(["ssl-proxying", "trust-upstream", appliance.group.appendingPathComponent("settings.json").path])
        #expect(notPEM.status != 0 && notPEM.stderr.contains("no PEM certificate"), "\(notPEM)")
    }
}
