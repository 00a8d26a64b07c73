import Foundation
import Testing

/// `upstream_proxy` with `"scheme": "socks5"`: one Busymate chained through
/// tests/socks/socks5_server.py, which logs what it was asked to connect to.
@Suite(.serialized) struct UpstreamSOCKSTests {
    /// The SOCKS5 server as a process on loopback.
    final class SOCKSServer {
        let process = Process()
        let log: URL
        let port: Int

        init(in directory: URL, user: String? = nil, password: String? = nil) throws {
            log = directory.appendingPathComponent("socks-\(UInt32.random(in: 0...UInt32.max)).log")
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments =
                [Command.repoRoot.appendingPathComponent("tests/socks/socks5_server.py").path, log.path]
                + (user.flatMap { user in password.map { [user, $0] } } ?? [])
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.runSerialized()
            var port: Int?
            let log = self.log
            do {
                try waitUntil("the SOCKS5 server says its port", timeout: 5) {
                    port = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").first.flatMap { Int($0) }
                    return port != nil
                }
            } catch {
                kill(process.processIdentifier, SIGKILL)
                throw error
            }
            self.port = port ?? 0
        }

        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
        }

        deinit { stop() }

        /// What it was asked, a line per connection.
        var seen: [String] { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").dropFirst().map(String.init) }
    }

    @Test func everyDialGoesThroughTheSOCKS5ProxyButBypassedHosts() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let front = try Appliance(settings: nil)
        let socks = try SOCKSServer(in: front.base)
        defer { socks.stop() }
        let trust = try front.trust(tlsOrigin)
        try front.writeSettings(
            Appliance.interceptionSettings(
                include: ["localhost"], trust: trust,
                extra: """
                    , "upstream_proxy": {"scheme": "socks5", "host": "127.0.0.1", "port": \(socks.port), "bypass": ["bypass.invalid"]},
                    "rules": [{"name": "direct", "match": "bypass.invalid/*", "action": "host_override", "address": "127.0.0.1"}]
                    """))
        try front.start()
        let port = try front.proxyPort

        // Plain HTTP: a SOCKS5 CONNECT, then origin-form inside.
        let plain = try front.curl("http://localhost:\(origin.port)/chained")
        #expect(plain.code == 200 && plain.body == "origin GET /chained\n", "\(plain.body) \(plain.result.stderr)")
        // Intercepted: TLS to the origin (verified) through the tunnel.
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--cacert", front.caFile.path, "-x", "http://127.0.0.1:\(port)",
                "https://localhost:\(tlsOrigin.port)/secret",
            ])
        #expect(mitm.status == 0 && mitm.stdout == "origin GET /secret\n", "\(mitm.stderr) \(mitm.stdout)")
        // Passed through.
        let pass = try Command.run(
            "/usr/bin/curl",
            ["-sS", "--cacert", trust.path, "-x", "http://127.0.0.1:\(port)", "https://127.0.0.1:\(tlsOrigin.port)/tunnel"])
        #expect(pass.status == 0 && pass.stdout == "origin GET /tunnel\n", "\(pass.stderr)")
        // Bypassed: dialled directly (the name only resolves through the front's rule).
        let direct = try front.curl("http://bypass.invalid:\(origin.port)/direct")
        #expect(direct.code == 200 && direct.body == "origin GET /direct\n", "\(direct.result.stderr)")

        // A SOCKS5 client of ours, chained on: its dial and its request go through the SOCKS5 server, by name.
        let both = try SOCKSTests.curl(port, "http://localhost:\(origin.port)/socks-both-ways")
        #expect(both.code == 200 && both.body == "origin GET /socks-both-ways\n", "\(both.result.stderr)")

        // The SOCKS5 server was asked for names as names (socks5h), never for the bypassed host.
        let seen = socks.seen
        #expect(seen.contains("CONNECT localhost:\(origin.port) domain auth=none"), "\(seen)")
        #expect(seen.contains("CONNECT localhost:\(tlsOrigin.port) domain auth=none"), "\(seen)")
        #expect(seen.contains("CONNECT 127.0.0.1:\(tlsOrigin.port) ipv4 auth=none"), "\(seen)")
        #expect(!seen.contains { $0.contains("bypass") || $0.contains(":\(origin.port) ipv4") }, "\(seen)")
        // The front's row went to the SOCKS5 server.
        let rows = try front.rows("the front stored four exchanges") { $0.count >= 4 }
        let chained = try front.row(rows.first { ($0["url"] as? String)?.hasSuffix("/chained") == true }?["id"])
        #expect(chained["server_address"] as? String == "127.0.0.1:\(socks.port)", "\(chained)")
    }

    @Test func usernameAndPasswordAreSentAndARefusalIsA502ThatSaysWhy() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let front = try Appliance(settings: nil)
        let socks = try SOCKSServer(in: front.base, user: "bm", password: "s3:cret")
        defer { socks.stop() }
        let trust = try front.trust(tlsOrigin)
        func settings(password: String) -> String {
            Appliance.interceptionSettings(
                include: ["localhost"], trust: trust,
                extra: """
                    , "upstream_proxy": {"scheme": "socks5", "host": "127.0.0.1", "port": \(socks.port), "username": "bm", "password": "\(password)"}
                    """)
        }
        try front.writeSettings(settings(password: "s3:cret"))
        try front.start()
        let port = try front.proxyPort
        let plain = try front.curl("http://127.0.0.1:\(origin.port)/authed")
        #expect(plain.code == 200 && plain.body == "origin GET /authed\n", "\(plain.body) \(plain.result.stderr)")
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--cacert", front.caFile.path, "-x", "http://127.0.0.1:\(port)",
                "https://localhost:\(tlsOrigin.port)/authed-tls",
            ])
        #expect(mitm.status == 0 && mitm.stdout == "origin GET /authed-tls\n", "\(mitm.stderr)")
        #expect(socks.seen.contains("CONNECT 127.0.0.1:\(origin.port) ipv4 auth=ok"), "\(socks.seen)")
        #expect(socks.seen.contains("CONNECT localhost:\(tlsOrigin.port) domain auth=ok"), "\(socks.seen)")

        // Wrong password: the client gets a 502 that says why, and so does the row.
        try front.writeSettings(settings(password: "wrong"))
        try waitUntil("the wrong password is in force", timeout: 3) { try front.curl("http://127.0.0.1:\(origin.port)/probe").code == 502 }
        let refused = try front.curl("http://127.0.0.1:\(origin.port)/refused")
        #expect(refused.code == 502 && refused.body.contains("refused the user name and password"), "\(refused.body)")
        let tunnel = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-w", "\n%{http_code}", "--cacert", trust.path, "-x", "http://127.0.0.1:\(port)",
                "https://127.0.0.1:\(tlsOrigin.port)/refused-tunnel",
            ])
        #expect(tunnel.stdout.hasSuffix("\n502") || tunnel.stderr.contains("502"), "\(tunnel.stdout) \(tunnel.stderr)")
        let rows = try front.rows("the refusal is stored") { $0.contains { ($0["url"] as? String)?.hasSuffix("/refused") == true } }
        let error = rows.first { ($0["url"] as? String)?.hasSuffix("/refused") == true }?["error"] as? String
        #expect(error?.contains("the upstream SOCKS5 proxy refused the user name and password") == true, "\(error ?? "no error")")
        #expect(socks.seen.contains("auth=refused"), "\(socks.seen)")
    }
}
