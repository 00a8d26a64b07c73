import BusymateShared
import Foundation
import Testing

/// HTTPS interception end to end: curl trusting only what the test says,
/// through the real binaries, to a TLS origin on loopback.
extension ApplianceTests {
    /// curl through the proxy trusting only `ca`; returns the result and the issuer curl saw.
    private func fetch(_ url: String, port: Int, trusting ca: URL) throws -> (
        code: Int, body: String, issuer: String?, result: CommandResult
    ) {
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-v", "--max-time", "10", "--cacert", ca.path, "-x", "http://127.0.0.1:\(port)",
                "-w", "\n%{http_code}", url,
            ])
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let issuer = r.stderr.split(separator: "\n").first { $0.contains("issuer:") }.map { String($0) }
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"), issuer, r)
    }

    @Test func interceptsListedHostsAndPassesTheOthersThrough() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.intercepting(origin)
        let originCA = try appliance.trust(origin)
        let port = try appliance.proxyPort
        #expect(try appliance.status().string("tunnel.interception") == "on")
        let ourCA = appliance.caFile

        // Listed: the client trusts only Busymate's CA and sees our leaf.
        let mitm = try fetch("https://localhost:\(origin.port)/secret?q=1", port: port, trusting: ourCA)
        #expect(mitm.code == 200, "\(mitm.result.stderr)")
        #expect(mitm.body == "origin GET /secret?q=1\n")
        #expect(mitm.issuer?.contains("Busymate CA") == true, "\(mitm.issuer ?? "no issuer")")
        // The same connection carries a second request (keep-alive inside TLS).
        let two = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", ourCA.path, "-x", "http://127.0.0.1:\(port)", "-w", "[%{num_connects}]",
                "https://localhost:\(origin.port)/a", "https://localhost:\(origin.port)/b",
            ])
        #expect(two.stdout == "origin GET /a\n[1]origin GET /b\n[0]", "\(two.stderr)")

        // Not listed (127.0.0.1): passed through, the origin's own certificate.
        let through = try fetch("https://127.0.0.1:\(origin.port)/open", port: port, trusting: originCA)
        #expect(through.code == 200, "\(through.result.stderr)")
        #expect(through.issuer?.contains("CN=localhost") == true, "\(through.issuer ?? "no issuer")")
        let refused = try fetch("https://127.0.0.1:\(origin.port)/open", port: port, trusting: ourCA)
        #expect(refused.result.status != 0)

        // The rows carry the TLS details: the client's SNI, and what the
        // server chose (upstream, for an intercepted exchange).
        func row(_ suffix: String, mode: String) throws -> [String: Any] {
            func matches(_ row: [String: Any]) -> Bool {
                (row["url"] as? String)?.hasSuffix(suffix) == true && row["tls"] as? String == mode
            }
            return try appliance.row(
                try appliance.rows("the \(suffix) row is stored") { $0.contains(where: matches) }.first(where: matches)?["id"])
        }
        let secret = try row("/secret?q=1", mode: "mitm")
        #expect(secret.at("tls_handshake", "sni") as? String == "localhost")
        #expect(secret.at("tls_handshake", "version") as? String == "TLSv1.3")
        #expect((secret.at("tls_handshake", "cipher") as? String)?.hasPrefix("TLS_") == true, "\(secret)")
        // Eager ALPN: the origin was dialled during the client's handshake, and the
        // first request took that connection over, as a reused one (no handshake of its own).
        #expect(secret["tls_done_at"] == nil || secret["tls_done_at"] is NSNull)
        // The second request reused the connection: same TLS, no new handshake.
        let reused = try row("/b", mode: "mitm")
        #expect(reused.at("tls_handshake", "version") as? String == "TLSv1.3")
        #expect(reused["tls_done_at"] == nil || reused["tls_done_at"] is NSNull)
        let tunnel = try row("127.0.0.1:\(origin.port)", mode: "passthrough")
        #expect(tunnel.at("tls_handshake", "sni") is NSNull, "no SNI for an IP address")
        #expect(tunnel.at("tls_handshake", "version") as? String == "TLSv1.3")
        #expect((tunnel.at("tls_handshake", "cipher") as? String)?.hasPrefix("TLS_") == true)
        let shown = try appliance.cli(["show", "\(secret["id"] as? Int ?? 0)"]).stdout
        #expect(shown.contains("tls: mitm, SNI localhost, TLSv1.3, TLS_"), "\(shown)")
    }

    @Test func aClientWithoutSNIGetsACertificateForTheConnectHost() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        let originCA = try appliance.trust(origin)
        try appliance.writeSettings(Appliance.interceptionSettings(include: ["localhost", "127.0.0.1"], trust: originCA))
        try appliance.start()
        let port = try appliance.proxyPort

        // openssl with no SNI at all: the leaf names the CONNECT host.
        let r = try Command.run(
            "/bin/sh",
            [
                "-c",
                "echo | openssl s_client -proxy 127.0.0.1:\(port) -connect localhost:\(origin.port) -noservername -CAfile '\(appliance.caFile.path)' -verify_hostname localhost -verify_return_error 2>&1",
            ])
        #expect(r.stdout.contains("Verify return code: 0 (ok)"), "\(r.stdout)")
        #expect(r.stdout.contains("CN = localhost") && r.stdout.contains("Busymate CA"), "\(r.stdout)")
        // An IP literal carries no SNI either: the leaf has an IP SAN, which curl checks.
        let byIP = try fetch("https://127.0.0.1:\(origin.port)/ip", port: port, trusting: appliance.caFile)
        #expect(byIP.code == 200, "\(byIP.result.stderr)")
        #expect(byIP.issuer?.contains("Busymate CA") == true, "\(byIP.issuer ?? "no issuer")")
    }

    @Test func anUntrustedUpstreamGetsA502UntilItIsMarkedInsecure() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Appliance.interceptionSettings(include: ["localhost"]))
        try appliance.start()
        let port = try appliance.proxyPort
        let ourCA = appliance.caFile
        let tunnel = try appliance.status().int("tunnel.pid")

        let rejected = try fetch("https://localhost:\(origin.port)/x", port: port, trusting: ourCA)
        #expect(rejected.code == 502)
        #expect(rejected.body.contains("certificate verify failed"), "\(rejected.body)")
        #expect(rejected.body.contains("insecure_upstream"))

        // Hot reload, no restart.
        try appliance.writeSettings(Appliance.interceptionSettings(include: ["localhost"], insecure: ["localhost"]))
        try waitUntil("the insecure host is served", timeout: 2) {
            try fetch("https://localhost:\(origin.port)/y", port: port, trusting: ourCA).code == 200
        }
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
    }

    @Test func addingAHostToTheListInterceptsItWithoutARestart() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        let originCA = try appliance.trust(origin)
        try appliance.writeSettings(Appliance.interceptionSettings(include: [], trust: originCA))
        try appliance.start()
        let port = try appliance.proxyPort
        let ourCA = appliance.caFile
        let tunnel = try appliance.status().int("tunnel.pid")
        #expect(try fetch("https://localhost:\(origin.port)/", port: port, trusting: originCA).code == 200)

        try appliance.writeSettings(Appliance.interceptionSettings(include: ["*"], trust: originCA))
        try waitUntil("the host is intercepted", timeout: 2) {
            try fetch("https://localhost:\(origin.port)/", port: port, trusting: ourCA).code == 200
        }
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
    }

    /// A client that trusts our CA for another host and refuses this one
    /// twice is pinning: the host is passed through, with no action by the
    /// user (`pin_loopback` lets this loopback client stand in for a device).
    @Test func aClientThatRejectsTheCAPinsItsHost() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.pinning(origin)
        let originCA = try appliance.trust(origin)
        let port = try appliance.proxyPort

        try appliance.trustUsElsewhere(origin)
        // A pinning client: it trusts only the origin's certificate, and refuses ours each time.
        for attempt in 1...2 {
            let refused = try fetch("https://localhost:\(origin.port)/pinned", port: port, trusting: originCA)
            #expect(refused.result.status != 0, "attempt \(attempt) should see our leaf and refuse it")
            // One refusal is no evidence: still intercepted after the first.
            if attempt == 1 {
                _ = try appliance.rows("the first refusal is stored") {
                    $0.contains { ($0["error"] as? String)?.contains("refused the interception") == true }
                }
                #expect(try appliance.cli(["pinned", "list"]).stdout.isEmpty)
                #expect(!appliance.log.contains("refused our certificate again (pinning)"))
            }
        }
        try waitUntil("the host is pinned", timeout: 2) {
            appliance.log.contains("refused our certificate again (pinning); passing this host through")
        }
        // The pin reaches the store through the capture sink (committed with the next batch).
        try waitUntil("the pin is stored", timeout: 5) { try appliance.cli(["pinned", "list"]).stdout.contains("localhost") }
        let through = try fetch("https://localhost:\(origin.port)/pinned", port: port, trusting: originCA)
        #expect(through.code == 200, "\(through.result.stderr)")
        #expect(through.issuer?.contains("CN=localhost") == true)
    }

    /// Issue 22: one curl without our CA must not turn interception off.
    /// Every local process shares 127.0.0.1: a loopback client's refusal
    /// never pins (by default), and its row says how to trust the CA.
    @Test func aCurlWithoutTheCADoesNotStopInterception() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.intercepting(origin)
        let port = try appliance.proxyPort
        let ours = try fetch("https://localhost:\(origin.port)/first", port: port, trusting: appliance.caFile)
        #expect(ours.code == 200 && ours.issuer?.contains("Busymate") == true, "\(ours.issuer ?? ours.result.stderr)")

        // The same curl without --cacert (the system store): refused, not pinned, and told how to trust the CA.
        let bare = ["-sS", "--max-time", "10", "-x", "http://127.0.0.1:\(port)", "https://localhost:\(origin.port)/bare"]
        #expect(try Command.run("/usr/bin/curl", bare).status != 0)
        let rows = try appliance.rows("the refusal is stored") {
            $0.contains { ($0["error"] as? String)?.contains("refused the interception") == true }
        }
        let why = rows.compactMap { $0["error"] as? String }.first { $0.contains("refused the interception") } ?? ""
        #expect(
            why.contains("Not pinned") && why.contains("`curl --cacert \(appliance.caFile.path)`") && why.contains("busymate ca export"),
            "\(why)")

        // The correct curl is still decrypted: it sees our leaf.
        let again = try fetch("https://localhost:\(origin.port)/again", port: port, trusting: appliance.caFile)
        #expect(again.code == 200 && again.issuer?.contains("Busymate") == true, "\(again.issuer ?? again.result.stderr)")
        #expect(try appliance.cli(["pinned", "list"]).stdout.isEmpty)

        // However often a local client refuses: never pinned by default.
        #expect(try Command.run("/usr/bin/curl", bare).status != 0)
        #expect(try Command.run("/usr/bin/curl", bare).status != 0)
        let still = try fetch("https://localhost:\(origin.port)/still", port: port, trusting: appliance.caFile)
        #expect(still.code == 200 && still.issuer?.contains("Busymate") == true, "\(still.issuer ?? still.result.stderr)")
        #expect(try appliance.cli(["pinned", "list"]).stdout.isEmpty)
        #expect(!appliance.log.contains("(pinning)"))
    }

    @Test func withoutAUsableCAHTTPSIsPassedThroughAndTheTunnelKeepsServing() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.intercepting(origin)
        let originCA = try appliance.trust(origin)
        let port = try appliance.proxyPort
        let tunnel = try appliance.status().int("tunnel.pid")

        // Break the key in place (an in-place save is seen by inotify).
        try Command.shell("printf 'not a key\\n' > \(appliance.group.path)/ca.key")
        try waitUntil("status says interception is off", timeout: 2) {
            try appliance.status().string("tunnel.interception")?.hasPrefix("off: ") == true
        }
        let through = try fetch("https://localhost:\(origin.port)/", port: port, trusting: originCA)
        #expect(through.code == 200, "\(through.result.stderr)")
        #expect(through.issuer?.contains("CN=localhost") == true)
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
        #expect(appliance.log.contains("the CA cannot be used; HTTPS is passed through"))
        #expect(try appliance.cli(["status"]).stdout.contains("interception off"))
    }
}

extension ApplianceTests {
    @Test func anUnusableUpstreamTrustBundleIsReportedInStatus() async throws {
        let appliance = try Appliance(settings: Appliance.interceptionSettings(include: ["localhost"]))
        try appliance.start()
        #expect(try appliance.status().isNull("tunnel.last_error"))
        try appliance.writeSettings(
            Appliance.interceptionSettings(include: ["localhost"], trust: appliance.base.appendingPathComponent("missing.pem")))
        try waitUntil("status shows the bad bundle", timeout: 2) {
            try appliance.status().string("tunnel.last_error")?.contains("ssl_proxying.upstream_trust") == true
        }
        #expect(try appliance.cli(["status"]).stdout.contains("tunnel error ssl_proxying.upstream_trust"))
    }
}
