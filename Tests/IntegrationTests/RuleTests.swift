import Foundation
import Testing

/// Rules end to end: settings.json → the tunnel → curl, read back from the store.
extension ApplianceTests {
    private static func rulesSettings(_ rules: String, include: [String] = ["localhost"], trust: URL? = nil) -> String {
        Appliance.interceptionSettings(include: include, trust: trust, extra: ", \"rules\": [\(rules)]")
    }

    @Test func blockAndDropRulesAnswerForTheOriginAndAreRecorded() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Self.rulesSettings(
                """
                {"name": "no ads", "match": "127.0.0.1:\(origin.port)/ads/*", "action": "block"},
                {"name": "teapot", "match": "localhost/brew", "action": "block", "status": 418},
                {"name": "cut", "match": "*/tracker", "action": "drop"},
                {"name": "off", "enabled": false, "match": "*/plain", "action": "block"}
                """, trust: trust))
        try appliance.start()
        let base = "http://127.0.0.1:\(origin.port)"

        let blocked = try appliance.curl("\(base)/ads/banner.js")
        #expect(blocked.code == 403)
        #expect(blocked.body.contains("blocked by the rule \"no ads\""))
        // A disabled rule does nothing; the origin answers.
        #expect(try appliance.curl("\(base)/plain").code == 200)
        // Inside an intercepted tunnel, with its own status.
        let teapot = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", appliance.caFile.path,
                "-x", "http://127.0.0.1:\(try appliance.proxyPort)", "https://localhost:\(tlsOrigin.port)/brew",
            ])
        #expect(teapot.stdout == "418")
        // drop: no answer at all (curl: empty reply from server).
        let dropped = try appliance.curl("\(base)/tracker")
        #expect(dropped.code == 0 && dropped.result.status == 52, "\(dropped.result.stderr)")
        // A blocked request on a kept-alive connection does not end it: curl reuses it for the next URL.
        let both = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-v", "-o", "/dev/null", "-o", "/dev/null", "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                "\(base)/ads/a.js", "\(base)/plain",
            ])
        #expect(both.status == 0)
        #expect(
            both.stderr.contains("Re-using existing connection") || both.stderr.contains("Reusing existing connection"), "\(both.stderr)")

        let rows = try appliance.rows("six exchanges are stored") { $0.count >= 6 }
        func row(_ suffix: String) -> [String: Any]? { rows.first { ($0["url"] as? String)?.hasSuffix(suffix) == true } }
        #expect(row("/ads/banner.js")?["rule"] as? String == "no ads")
        #expect(row("/ads/banner.js")?["status"] as? Int == 403)
        #expect(row("/brew")?["rule"] as? String == "teapot")
        #expect(row("/brew")?["status"] as? Int == 418)
        #expect(row("/tracker")?["rule"] as? String == "cut")
        #expect((row("/tracker")?["error"] as? String)?.contains("dropped by the rule \"cut\"") == true)
        #expect(row("/plain")?["rule"] is NSNull)
        #expect(try appliance.cli(["show", "\(row("/ads/banner.js")?["id"] as? Int ?? 0)"]).stdout.contains("rule: no ads"))
    }

    @Test func aRuleChangeAppliesWithoutARestart() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.rulesSettings(#"{"name": "gate", "match": "*/plain", "action": "block"}"#))
        try appliance.start()
        let tunnel = try appliance.status().int("tunnel.pid")
        let url = "http://127.0.0.1:\(origin.port)/plain"
        #expect(try appliance.curl(url).code == 403)
        try appliance.writeSettings(Self.rulesSettings(#"{"name": "gate", "enabled": false, "match": "*/plain", "action": "block"}"#))
        try waitUntil("the disabled rule lets the request through", timeout: 3) { try appliance.curl(url).code == 200 }
        try appliance.writeSettings(Self.rulesSettings(#"{"name": "gate", "match": "*/plain", "action": "block", "status": 451}"#))
        try waitUntil("the rule is back, with its new status", timeout: 3) { try appliance.curl(url).code == 451 }
        #expect(try appliance.status().int("tunnel.pid") == tunnel)
    }

    @Test func aHeadersRuleEditsTheRequestAndTheResponseAsRecorded() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Self.rulesSettings(
                """
                {"name": "trace", "match": "*/echo-headers", "action": "headers",
                 "request": {"remove": ["X-Secret"], "set": {"User-Agent": "busymate-rule"}, "add": {"X-Added": "1"}},
                 "response": {"remove": ["X-Origin"], "add": {"X-Rule": "trace"}}},
                {"name": "later", "match": "*", "action": "headers", "request": {"add": {"X-Later": "1"}}}
                """, trust: trust))
        try appliance.start()
        let port = try appliance.proxyPort
        for url in ["http://127.0.0.1:\(origin.port)/echo-headers", "https://localhost:\(tlsOrigin.port)/echo-headers"] {
            let r = try Command.run(
                "/usr/bin/curl",
                [
                    "-sS", "-i", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)",
                    "-H", "X-Secret: hunter2", "-A", "curl-original", url,
                ])
            #expect(r.status == 0, "\(r.stderr)")
            // Through CONNECT, curl -i shows the proxy's 200 first: the last head is the origin's.
            let parts = r.stdout.components(separatedBy: "\r\n\r\n")
            let (head, body) = (parts.dropLast().last ?? "", parts.last ?? "")
            // What the origin saw.
            #expect(body.contains("User-Agent: busymate-rule\n") && body.contains("X-Added: 1\n"), "\(url): \(body)")
            #expect(
                !body.contains("X-Secret") && !body.contains("curl-original") && !body.contains("X-Later"), "first match per kind: \(body)")
            // What the client got.
            // (Through the tunnel curl speaks HTTP/2: header names in lower case.)
            #expect(head.lowercased().contains("x-rule: trace") && !head.lowercased().contains("x-origin"), "\(url): \(head)")
        }
        let rows = try appliance.rows("both exchanges are stored") { $0.count >= 2 }
        for row in rows {
            #expect(row["rule"] as? String == "trace")
            let full = try appliance.row(row["id"])
            #expect(full.headerLines("request").contains("X-Added: 1"), "\(full)")
            #expect(full.headerLines("response").contains { $0.hasPrefix("X-Rule: ") })
            #expect(!full.headerLines("response").contains { $0.hasPrefix("X-Origin") })
        }
    }

    @Test func mapLocalServesFilesAndNeverLeavesItsDirectory() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let fm = FileManager.default
        let www = appliance.base.appendingPathComponent("www")
        try fm.createDirectory(at: www.appendingPathComponent("js"), withIntermediateDirectories: true)
        try Data("<h1>mock</h1>".utf8).write(to: www.appendingPathComponent("index.html"))
        try Data("console.log(1)".utf8).write(to: www.appendingPathComponent("js/app.js"))
        try Data("top secret".utf8).write(to: appliance.base.appendingPathComponent("secret.txt"))
        try fm.createSymbolicLink(atPath: www.appendingPathComponent("link").path, withDestinationPath: "../secret.txt")
        let config = appliance.base.appendingPathComponent("config.json")
        try Data(#"{"mock":true}"#.utf8).write(to: config)
        for path in [appliance.base.path, www.path, www.appendingPathComponent("js").path] { chmod(path, 0o755) }
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Self.rulesSettings(
                """
                {"name": "site", "match": "127.0.0.1:\(origin.port)/static/*", "action": "map_local", "directory": "\(www.path)"},
                {"name": "config", "match": "*/v1/config", "action": "map_local", "file": "\(config.path)"}
                """, trust: trust))
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)/static"
        func get(_ url: String) throws -> (code: Int, body: String, type: String) {
            let r = try Command.run(
                "/usr/bin/curl",
                [
                    "-sS", "--path-as-is", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)",
                    "-w", "\n%{http_code} %{content_type}", url,
                ])
            let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let last = (lines.last ?? "").split(separator: " ", maxSplits: 1)
            return (Int(last.first ?? "") ?? 0, lines.dropLast().joined(separator: "\n"), last.count > 1 ? String(last[1]) : "")
        }
        let script = try get("\(base)/js/app.js")
        #expect(script.code == 200 && script.body == "console.log(1)" && script.type.hasPrefix("text/javascript"))
        #expect(try get("\(base)/").body == "<h1>mock</h1>")
        #expect(try get("\(base)/js/app.js?v=2").body == "console.log(1)")
        // Out of the root: plain, encoded, doubly-dotted, and through a symlink.
        for escape in ["\(base)/../secret.txt", "\(base)/%2e%2e/secret.txt", "\(base)/js/%2E%2E/%2e%2e/secret.txt", "\(base)/link"] {
            let r = try get(escape)
            #expect(r.code == 403 && !r.body.contains("top secret"), "\(escape): \(r)")
        }
        #expect(try get("\(base)/missing.js").code == 404)
        // A FIFO is no file to serve (opening it would wait for a writer).
        #expect(mkfifo(www.appendingPathComponent("pipe").path, 0o644) == 0)
        #expect(try get("\(base)/pipe").code == 403)
        // A file rule, inside an intercepted tunnel.
        let mocked = try get("https://localhost:\(tlsOrigin.port)/v1/config")
        #expect(mocked.code == 200 && mocked.body == #"{"mock":true}"# && mocked.type == "application/json")

        let rows = try appliance.rows("the exchanges are stored") { $0.count >= 10 }
        let served = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/static/js/app.js") == true })
        #expect(served["rule"] as? String == "site" && served["status"] as? Int == 200)
        #expect(try appliance.cli(["show", "\(served["id"] as? Int ?? 0)"]).stdout.contains("console.log(1)"))
        let refused = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/link") == true })
        #expect((refused["error"] as? String)?.contains("leads out of the mapped directory") == true, "\(refused)")
        #expect(rows.first { ($0["url"] as? String)?.hasSuffix("/v1/config") == true }?["rule"] as? String == "config")
    }

    @Test func hostOverrideDialsTheGivenAddressForAName() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        // .invalid never resolves (RFC 6761): only the rule can make these work.
        try appliance.writeSettings(
            Appliance.interceptionSettings(
                include: ["mitm.invalid"], insecure: ["mitm.invalid"],
                extra: """
                    , "rules": [{"name": "spoof", "match": "*.invalid/*", "action": "host_override", "address": "127.0.0.1"}]
                    """))
        try appliance.start()
        let plain = try appliance.curl("http://api.invalid:\(origin.port)/plain")
        #expect(plain.code == 200 && plain.body.contains("origin GET /plain"), "\(plain.result.stderr)")
        // Intercepted: the name still goes in SNI; the address is the rule's.
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                "https://mitm.invalid:\(tlsOrigin.port)/spoofed",
            ])
        #expect(mitm.status == 0 && mitm.stdout.contains("origin GET /spoofed"), "\(mitm.stderr)")
        // Passed through (not on the SSL-proxying list): the tunnel dials the rule's address.
        let tunnel = try Command.run(
            "/usr/bin/curl",
            ["-sS", "-k", "-x", "http://127.0.0.1:\(try appliance.proxyPort)", "https://pass.invalid:\(tlsOrigin.port)/through"])
        #expect(tunnel.status == 0 && tunnel.stdout.contains("origin GET /through"), "\(tunnel.stderr)")
        let rows = try appliance.rows("three exchanges are stored") { $0.count >= 3 }
        #expect(rows.allSatisfy { $0["rule"] as? String == "spoof" }, "\(rows)")
        let row = try appliance.row(rows.first { ($0["url"] as? String)?.hasSuffix("/plain") == true }?["id"])
        #expect((row["server_address"] as? String)?.hasPrefix("127.0.0.1:") == true)
    }

    @Test func theRulesCommandEditsSettingsLiveAndExplainsMatches() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: #"{"future_feature": 1, "proxy": {"listen": ["127.0.0.1:0"]}}"#)
        try appliance.start()
        let url = "http://127.0.0.1:\(origin.port)/plain"
        #expect(try appliance.curl(url).code == 200)

        let added = try appliance.cli(["rules", "add", "gate", "--match", "*/plain", "--action", "block"])
        #expect(added.status == 0, "\(added.stderr)")
        try waitUntil("the new rule blocks", timeout: 3) { try appliance.curl(url).code == 403 }
        #expect(try appliance.cli(["rules", "list"]).stdout == "1. gate: */plain → block 403\n")

        #expect(try appliance.cli(["rules", "disable", "gate"]).status == 0)
        try waitUntil("the disabled rule lets it through", timeout: 3) { try appliance.curl(url).code == 200 }
        #expect(try appliance.cli(["rules", "enable", "gate"]).status == 0)
        try waitUntil("the enabled rule blocks again", timeout: 3) { try appliance.curl(url).code == 403 }

        let json = #"{"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}}"#
        #expect(try appliance.cli(["rules", "add", "--json", json, "--at", "1"]).status == 0)
        #expect(try appliance.cli(["rules", "list"]).stdout.hasPrefix("1. trace: */* → headers (1 request, 0 response edits)\n2. gate"))
        let explained = try appliance.cli(["rules", "test", url]).stdout
        #expect(explained.contains("gate: */plain → block 403 — applies"), "\(explained)")
        #expect(
            explained.contains("trace: */* → headers (1 request, 0 response edits) — matches, not reached: the request is blocked"),
            "\(explained)")
        #expect(
            try appliance.cli(["rules", "test", "http://elsewhere.test/other"]).stdout.contains(
                "trace: */* → headers (1 request, 0 response edits) — applies"))

        // Refused edits leave the file as it was, and say why.
        let before = try String(contentsOf: appliance.settingsURL, encoding: .utf8)
        let bad = try appliance.cli(["rules", "add", "oops", "--match", "/x", "--action", "block"])
        #expect(bad.status != 0 && bad.stderr.contains("starts with a host"), "\(bad.stderr)")
        let twice = try appliance.cli(["rules", "add", "gate", "--match", "*/x", "--action", "drop"])
        #expect(twice.status != 0 && twice.stderr.contains("another rule is named \"gate\""), "\(twice.stderr)")
        #expect(try String(contentsOf: appliance.settingsURL, encoding: .utf8) == before)

        #expect(try appliance.cli(["rules", "remove", "gate"]).status == 0)
        try waitUntil("without the rule the origin answers", timeout: 3) { try appliance.curl(url).code == 200 }
        let gone = try appliance.cli(["rules", "remove", "gate"])
        #expect(gone.status != 0 && gone.stderr.contains("no rule is named \"gate\""))
        #expect(try String(contentsOf: appliance.settingsURL, encoding: .utf8).contains("\"future_feature\": 1"))
        // A hand-broken "rules" is not overwritten by an edit.
        let broken = #"{"proxy": {"listen": ["127.0.0.1:0"]}, "rules": {"name": "x"}}"#
        try appliance.writeSettings(broken)
        let refused = try appliance.cli(["rules", "add", "gate", "--match", "*/plain", "--action", "block"])
        #expect(refused.status != 0 && refused.stderr.contains("not an array"), "\(refused.stderr)")
        #expect(try String(contentsOf: appliance.settingsURL, encoding: .utf8) == Appliance.webOnAnyPort(broken))
    }

    @Test func mapRemoteSendsRequestsElsewhereAcrossSchemes() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Self.rulesSettings(
                """
                {"name": "api", "match": "api.invalid/v1/*", "action": "map_remote", "to": "http://127.0.0.1:\(origin.port)/mapped/"},
                {"name": "keep", "match": "hdr.invalid/*", "action": "map_remote", "to": "http://127.0.0.1:\(origin.port)"},
                {"name": "up", "match": "tls.invalid/*", "action": "map_remote", "to": "https://localhost:\(tlsOrigin.port)/"},
                {"name": "down", "match": "mitm.invalid/*", "action": "map_remote", "to": "http://127.0.0.1:\(origin.port)/"}
                """, include: ["mitm.invalid"], trust: trust))
        try appliance.start()
        // Plain to plain: the path below the prefix, under the rule's path; the query kept.
        let api = try appliance.curl("http://api.invalid/v1/users?page=2")
        #expect(api.code == 200 && api.body.contains("origin GET /mapped/users?page=2"), "\(api.body) \(api.result.stderr)")
        // No path in `to`: the request's own; the origin sees its own name in Host.
        let echo = try appliance.curl("http://hdr.invalid/echo-headers")
        #expect(echo.body.contains("Host: 127.0.0.1:\(origin.port)\n"), "\(echo.body)")
        // Plain to https (verified against the origin's certificate).
        let up = try appliance.curl("http://tls.invalid/secure")
        #expect(up.code == 200 && up.body.contains("origin GET /secure"), "\(up.body) \(up.result.stderr)")
        // Intercepted https to plain.
        let down = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
                "https://mitm.invalid/x",
            ])
        #expect(down.status == 0 && down.stdout.contains("origin GET /x"), "\(down.stderr)")
        // Rows keep what the client asked for, name the rule, and say where it went.
        let rows = try appliance.rows("four exchanges are stored") { $0.count >= 4 }
        let row = try #require(rows.first { $0["url"] as? String == "http://api.invalid/v1/users?page=2" })
        #expect(row["rule"] as? String == "api" && row["status"] as? Int == 200)
        #expect((try appliance.row(row["id"])["server_address"] as? String) == "127.0.0.1:\(origin.port)")
        #expect(rows.first { ($0["url"] as? String)?.hasPrefix("http://tls.invalid") == true }?["rule"] as? String == "up")
        #expect(rows.first { ($0["url"] as? String)?.hasPrefix("https://mitm.invalid") == true }?["rule"] as? String == "down")
    }
}
