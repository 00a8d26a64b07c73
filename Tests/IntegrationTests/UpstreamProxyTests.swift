import Foundation
import Testing

/// upstream_proxy end to end: one Busymate chained through a second one on
/// loopback, whose own store shows what came through it.
extension ApplianceTests {
    @Test func everyDialGoesThroughTheUpstreamProxyButBypassedHosts() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let upstream = try Appliance(settings: nil)
        try upstream.writeSettings(#"{"proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 1}}"#)
        try upstream.start()
        let upstreamPort = try upstream.proxyPort

        let front = try Appliance(settings: nil)
        let trust = try front.trust(tlsOrigin)
        func settings(proxyPort: Int) -> String {
            Appliance.interceptionSettings(
                include: ["localhost"], trust: trust,
                extra: """
                    , "upstream_proxy": {"host": "127.0.0.1", "port": \(proxyPort), "bypass": ["bypass.invalid"]},
                    "rules": [{"name": "direct", "match": "bypass.invalid/*", "action": "host_override", "address": "127.0.0.1"}]
                    """)
        }
        try front.writeSettings(settings(proxyPort: upstreamPort))
        try front.start()
        let port = try front.proxyPort

        // Plain HTTP: absolute-form through the upstream proxy.
        let plain = try front.curl("http://127.0.0.1:\(origin.port)/chained")
        #expect(plain.code == 200 && plain.body.contains("origin GET /chained"), "\(plain.result.stderr)")
        // Intercepted: CONNECT through it, then TLS to the origin (verified), inside.
        // Not eager (docs/decisions.md): the origin is dialled per request through the chain, so an h2 client
        // keeps h2 in front of this origin that offers no ALPN (a direct one would be given http/1.1).
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--http2", "-w", "[%{http_version}]", "--cacert", front.caFile.path,
                "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/secret",
            ])
        #expect(mitm.status == 0 && mitm.stdout.contains("origin GET /secret"), "\(mitm.stderr) \(mitm.stdout)")
        #expect(mitm.stdout.hasSuffix("[2]"), "\(mitm.stdout)")
        // Passed through: CONNECT through it too.
        let pass = try Command.run(
            "/usr/bin/curl",
            ["-sS", "--cacert", trust.path, "-x", "http://127.0.0.1:\(port)", "https://127.0.0.1:\(tlsOrigin.port)/tunnel"])
        #expect(pass.status == 0 && pass.stdout.contains("origin GET /tunnel"), "\(pass.stderr)")
        // Bypassed: dialled directly (the name only resolves through the front's rule).
        let direct = try front.curl("http://bypass.invalid:\(origin.port)/direct")
        #expect(direct.code == 200 && direct.body.contains("origin GET /direct"), "\(direct.result.stderr)")

        // What the upstream proxy saw: the three, not the bypassed one.
        let seen = try upstream.rows("the upstream proxy stored three exchanges") { $0.count >= 3 }
        let urls = seen.compactMap { $0["url"] as? String }
        #expect(urls.contains("http://127.0.0.1:\(origin.port)/chained"), "\(urls)")
        #expect(urls.contains("localhost:\(tlsOrigin.port)"), "\(urls)")
        #expect(urls.contains("127.0.0.1:\(tlsOrigin.port)"), "\(urls)")
        #expect(!urls.contains { $0.contains("/direct") }, "\(urls)")
        // The front's rows say the exchanges went to the upstream proxy.
        let frontRows = try front.rows("the front stored four exchanges") { $0.count >= 4 }
        let chained = try front.row(frontRows.first { ($0["url"] as? String)?.hasSuffix("/chained") == true }?["id"])
        #expect(chained["server_address"] as? String == "127.0.0.1:\(upstreamPort)")

        // An upstream proxy that cannot be reached: a 502 that says so, and a row with the error.
        try front.writeSettings(settings(proxyPort: 1))
        try waitUntil("the dead upstream proxy is in force", timeout: 3) {
            try front.curl("http://127.0.0.1:\(origin.port)/dead").code == 502
        }
        let failed = try front.rows("the failure is stored") { $0.contains { ($0["url"] as? String)?.hasSuffix("/dead") == true } }
        let error = failed.first { ($0["url"] as? String)?.hasSuffix("/dead") == true }?["error"] as? String
        #expect(error?.contains("cannot connect") == true, "\(error ?? "no error")")
    }

    /// tests/upstream-proxy/auth_proxy.py: a real proxy process on loopback that demands basic auth.
    private final class AuthProxy {
        let process = Process()
        let log: URL
        let port: Int

        init(user: String, password: String, in directory: URL) throws {
            log = directory.appendingPathComponent("auth-proxy.log")
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [
                Command.repoRoot.appendingPathComponent("tests/upstream-proxy/auth_proxy.py").path, user, password, log.path,
            ]
            // Nothing of the test runner's: an inherited pipe would keep it waiting for EOF.
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.runSerialized()
            var port: Int?
            let log = self.log
            do {
                try waitUntil("the auth proxy says its port", timeout: 5) {
                    port = (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").first.flatMap { Int($0) }
                    return port != nil
                }
            } catch {
                kill(process.processIdentifier, SIGKILL)
                throw error
            }
            self.port = port ?? 0
        }

        /// SIGKILL: children of Foundation's Process start with SIGTERM blocked.
        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitForExit()
        }

        deinit { stop() }

        /// What it saw, a line per request.
        var seen: [String] { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").dropFirst().map(String.init) }
    }

    @Test func basicAuthIsSentToAnUpstreamProxyThatDemandsIt() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let front = try Appliance(settings: nil)
        let proxy = try AuthProxy(user: "bm", password: "s3:cret", in: front.base)
        defer { proxy.stop() }
        let trust = try front.trust(tlsOrigin)
        func settings(password: String) -> String {
            Appliance.interceptionSettings(
                include: ["localhost"], trust: trust,
                extra: """
                    , "upstream_proxy": {"host": "127.0.0.1", "port": \(proxy.port), "username": "bm", "password": "\(password)"}
                    """)
        }
        try front.writeSettings(settings(password: "s3:cret"))
        try front.start()
        let port = try front.proxyPort
        let plain = try front.curl("http://127.0.0.1:\(origin.port)/authed")
        #expect(plain.code == 200 && plain.body.contains("origin GET /authed"), "\(plain.body) \(plain.result.stderr)")
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--max-time", "20", "--cacert", front.caFile.path, "-x", "http://127.0.0.1:\(port)",
                "https://localhost:\(tlsOrigin.port)/authed-tls",
            ])
        #expect(mitm.status == 0 && mitm.stdout.contains("origin GET /authed-tls"), "\(mitm.stderr)")

        // Wrong credentials: the proxy's 407 reaches the client for plain HTTP; a refused CONNECT is a 502 that says why.
        try front.writeSettings(settings(password: "wrong"))
        try waitUntil("the wrong password is in force", timeout: 3) {
            try front.curl("http://127.0.0.1:\(origin.port)/refused").code == 407
        }
        let refused = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-w", "\n%{http_code}", "--cacert", front.caFile.path, "-x", "http://127.0.0.1:\(port)",
                "https://localhost:\(tlsOrigin.port)/refused-tls",
            ])
        #expect(refused.stdout.hasSuffix("\n502") && refused.stdout.contains("407"), "\(refused.stdout)")
        let seen = proxy.seen
        #expect(seen.contains("GET http://127.0.0.1:\(origin.port)/authed HTTP/1.1 auth=ok"), "\(seen)")
        #expect(seen.contains("CONNECT localhost:\(tlsOrigin.port) HTTP/1.1 auth=ok"), "\(seen)")
        #expect(seen.contains { $0.hasPrefix("GET http://127.0.0.1:\(origin.port)/refused") && $0.hasSuffix("auth=refused") }, "\(seen)")
        let rows = try front.rows("the refused CONNECT is stored") {
            $0.contains { ($0["url"] as? String)?.hasSuffix("/refused-tls") == true }
        }
        let error = rows.first { ($0["url"] as? String)?.hasSuffix("/refused-tls") == true }?["error"] as? String
        #expect(error?.contains("407") == true, "\(error ?? "no error")")
    }
}
