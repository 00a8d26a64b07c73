import Foundation
import Testing

/// The CLI's settings commands: their `--json` (docs/usage.md, "JSON output") and
/// edits of settings.json, read back from the file and from the tunnel.
extension ApplianceTests {
    private func json(_ appliance: Appliance, _ arguments: [String]) throws -> Any {
        let r = try appliance.cli(arguments)
        guard r.status == 0 else { throw Failure("busymate \(arguments.joined(separator: " ")) failed (\(r.status)): \(r.stderr)") }
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8))
    }

    private func settings(_ appliance: Appliance) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: appliance.settingsURL)) as? [String: Any] ?? [:]
    }

    @Test func rulesAndSSLProxyingListsReadBackAsJSONAfterEdits() throws {
        let appliance = try Appliance(settings: #"{"future_feature": 1, "proxy": {"listen": ["127.0.0.1:0"]}}"#)
        let trace = #"{"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}}"#
        for args in [
            ["gate", "--match", "*/plain", "--action", "block", "--status", "451"], ["--json", trace, "--at", "1"],
            ["off", "--match", "*/plain", "--action", "drop", "--disabled"],
        ] {
            let r = try appliance.cli(["rules", "add"] + args)
            #expect(r.status == 0, "\(r.stderr)")
        }
        let rules = try #require(try json(appliance, ["rules", "list", "--json"]) as? [[String: Any]])
        #expect(rules.map { $0["index"] as? Int } == [1, 2, 3])
        #expect(rules.map { $0["name"] as? String } == ["trace", "gate", "off"])
        #expect(rules.map { $0["enabled"] as? Bool } == [true, true, false])
        #expect(rules.map { $0["action"] as? String } == ["headers", "block", "drop"])
        #expect(rules[1]["match"] as? String == "*/plain")
        #expect(rules[1].at("rule", "status") as? Int == 451 && rules[0].at("rule", "request", "add", "X-Trace") as? String == "1")

        let test = try #require(try json(appliance, ["rules", "test", "http://example.test/plain", "--json"]) as? [String: Any])
        #expect(test["url"] as? String == "http://example.test/plain")
        let matches = test["matches"] as? [[String: Any]] ?? []
        #expect(matches.map { $0["name"] as? String } == ["trace", "gate", "off"])
        #expect(matches.map { $0["applies"] as? Bool } == [false, true, false])
        #expect(matches.map { $0["reason"] as? String } == ["blocked", "applies", "disabled"])
        #expect(matches[0]["by"] as? String == "gate" && matches[1]["by"] is NSNull && matches[2]["index"] as? Int == 3)
        #expect(test["applied"] as? [String] == ["gate"])
        let none = try #require(try json(appliance, ["rules", "test", "http://example.test/other", "--json"]) as? [String: Any])
        #expect(none["applied"] as? [String] == ["trace"])

        for args in [["localhost"], ["--exclude", "bank.localhost"], ["--insecure-upstream", "*.selfsigned.test"]] {
            let r = try appliance.cli(["ssl-proxying", "add"] + args)
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try settings(appliance).at("ssl_proxying", "insecure_upstream") as? [String] == ["*.selfsigned.test"])
        let lists = try #require(try json(appliance, ["ssl-proxying", "list", "--json"]) as? [String: Any])
        #expect(lists["include"] as? [String] == ["localhost"] && lists["exclude"] as? [String] == ["bank.localhost"])
        #expect(lists["insecure_upstream"] as? [String] == ["*.selfsigned.test"])
        let twice = try appliance.cli(["ssl-proxying", "add", "--insecure-upstream", "*.selfsigned.test"])
        #expect(twice.status != 0 && twice.stderr.contains("already in ssl_proxying.insecure_upstream"), "\(twice.stderr)")
        #expect(try appliance.cli(["ssl-proxying", "add", "--exclude", "--insecure-upstream", "x.test"]).status != 0)
        #expect(try appliance.cli(["ssl-proxying", "remove", "--insecure-upstream", "*.selfsigned.test"]).status == 0)
        #expect(try settings(appliance).at("ssl_proxying", "insecure_upstream") as? [String] == [])
        #expect(try settings(appliance)["future_feature"] as? Int == 1)
    }

    @Test func rulesAddTakesFilesFromTheCurrentDirectoryAndNamesTheFlagAtFault() throws {
        let appliance = try Appliance(settings: #"{"proxy": {"listen": ["127.0.0.1:0"]}}"#)
        let work = appliance.base.appendingPathComponent("work")
        try FileManager.default.createDirectory(at: work.appendingPathComponent("site"), withIntermediateDirectories: true)
        try Data(#"{"mock": true}"#.utf8).write(to: work.appendingPathComponent("mock.json"))
        func add(_ args: String) throws -> CommandResult {
            try Command.shell("cd '\(work.path)' && '\(Command.binary("busymate"))' rules add \(args) --group '\(appliance.group.path)'")
        }
        #expect(try add("mock --match '*/config' --action map_local --file ./mock.json").status == 0)
        #expect(try add("site --match '*/static/*' --action map_local --directory site").status == 0)
        let rules = try settings(appliance)["rules"] as? [[String: Any]] ?? []
        #expect(
            rules.map { $0["file"] as? String ?? $0["directory"] as? String } == [
                work.appendingPathComponent("mock.json").path, work.appendingPathComponent("site").path,
            ])

        // Refused, the argument named, the file untouched.
        let before = try Data(contentsOf: appliance.settingsURL)
        for (args, expected) in [
            ("x --match '*/x' --action map_local --file ./missing.json", "--file ./missing.json: no such file"),
            ("x --match '*/x' --action map_local --directory mock.json", "--directory mock.json: not a directory"),
            ("x --match '*/x' --action block --status 999", "--status: must be an error status from 400 to 599"),
            ("x --match /x --action block", "--match: \"/x\": a URL pattern starts with a host"),
            ("x --match '*/x' --action map_remote", "a map_remote rule needs --to"),
            ("--json '{\"name\": \"x\", \"match\": \"*/x\", \"action\": \"block\", \"status\": 200}'", "--json: status: must be"),
        ] {
            let r = try add(args)
            #expect(r.status != 0 && r.stderr.contains(expected), "\(args): \(r.stderr)")
            // Not a line:column in a file the user never wrote.
            #expect(
                !r.stderr.contains("settings.json") && r.stderr.range(of: #"\d+:\d+"#, options: .regularExpression) == nil, "\(r.stderr)")
        }
        #expect(try Data(contentsOf: appliance.settingsURL) == before)
    }

    @Test func breakpointPatternsFromTheCLIHoldRequestsAndTheReadCommandsSpeakJSON() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        let untrusted = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
                await untrusted.stop()
            }
        }
        let appliance = try Appliance.pinning(tlsOrigin)
        let pattern = "127.0.0.1:\(origin.port)/echo-body/held*"
        let added = try appliance.cli(["breakpoints", "add", "request", pattern])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(try settings(appliance).at("breakpoints", "request") as? [String] == [pattern])
        let patterns = try #require(try json(appliance, ["breakpoints", "list-patterns", "--json"]) as? [String: Any])
        #expect(
            patterns["request"] as? [String] == [pattern] && patterns["response"] as? [String] == []
                && patterns["timeout_seconds"] as? Int == 60)
        let again = try appliance.cli(["breakpoints", "add", "request", pattern])
        #expect(again.status != 0 && again.stderr.contains("already in breakpoints.request"), "\(again.stderr)")
        let bad = try appliance.cli(["breakpoints", "add", "response", "/no-host"])
        #expect(bad.status != 0 && bad.stderr.contains("starts with a host"), "\(bad.stderr)")

        // The tunnel applies it: the request is held.
        let held = try appliance.startCurl(["http://127.0.0.1:\(origin.port)/echo-body/held"])
        let event = try appliance.held(1)[0]
        let rfc3339 = #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#
        #expect(event["kind"] as? String == "request" && event["method"] as? String == "GET" && event["requested"] is NSNull)
        #expect((event["paused_at"] as? String)?.range(of: rfc3339, options: .regularExpression) != nil, "\(event)")
        #expect(event["request_id"] is String && event["tunnel_pid"] as? Int == appliance.tunnelPIDs().first.map(Int.init))
        #expect(try appliance.cli(["breakpoints", "continue", "\(event["id"] as? Int ?? 0)"]).status == 0)
        #expect(try held.finish().stdout.hasSuffix("\n200"))
        #expect(try appliance.cli(["breakpoints", "remove", "request", pattern]).status == 0)
        let gone = try appliance.cli(["breakpoints", "remove", "request", pattern])
        #expect(gone.status != 0 && gone.stderr.contains("is not in breakpoints.request"), "\(gone.stderr)")
        try waitUntil("an unheld request goes through", timeout: 3) {
            try appliance.curl("http://127.0.0.1:\(origin.port)/echo-body/held").code == 200
        }

        // --insecure-upstream reaches the tunnel: an origin it cannot verify is served.
        let url = "https://localhost:\(untrusted.port)/"
        let viaUs = [
            "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", appliance.caFile.path, "-x",
            "http://127.0.0.1:\(try appliance.proxyPort)", url,
        ]
        #expect(try Command.run("/usr/bin/curl", viaUs).stdout != "200")
        #expect(try appliance.cli(["ssl-proxying", "add", "--insecure-upstream", "localhost"]).status == 0)
        try waitUntil("the unverified origin is served", timeout: 3) { try Command.run("/usr/bin/curl", viaUs).stdout == "200" }

        // A client that trusts our CA elsewhere and refuses our certificate twice pins its host: `pinned list --json`.
        let pinning = [
            "-sS", "--cacert", try appliance.trust(tlsOrigin).path, "-x", "http://127.0.0.1:\(try appliance.proxyPort)",
            "https://localhost:\(tlsOrigin.port)/",
        ]
        try appliance.trustUsElsewhere(tlsOrigin)
        #expect(try Command.run("/usr/bin/curl", pinning).status != 0)
        #expect(try Command.run("/usr/bin/curl", pinning).status != 0)
        var pins: [[String: Any]] = []
        try waitUntil("the pin is stored", timeout: 3) {
            pins = try json(appliance, ["pinned", "list", "--json"]) as? [[String: Any]] ?? []
            return !pins.isEmpty
        }
        #expect(pins[0]["host"] as? String == "localhost" && (pins[0]["count"] as? Int ?? 0) >= 1 && pins[0].keys.contains("reason"))
        #expect(
            ["first_seen", "last_seen"].allSatisfy { (pins[0][$0] as? String)?.range(of: rfc3339, options: .regularExpression) != nil },
            "\(pins)")
    }
}
