import BusymateShared
import Foundation
import Testing

/// Capture end to end: traffic through the real binaries, read back with
/// the real CLI from the real SQLite file.
extension ApplianceTests {
    private func listJSON(_ appliance: Appliance, _ args: [String] = []) throws -> [[String: Any]] {
        let r = try appliance.cli(["list", "--json"] + args)
        guard r.status == 0, let array = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] else {
            throw Failure("busymate list --json failed (\(r.status)): \(r.stderr)")
        }
        return array
    }

    @Test func everyExchangeIsCapturedAndReadableFromTheCLI() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance.intercepting(tlsOrigin)
        let originCA = try appliance.trust(tlsOrigin)
        let port = try appliance.proxyPort
        let ourCA = appliance.caFile.path

        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/plain?x=1", extra: ["-H", "X-Test: one"]).code == 200)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/form", extra: ["-d", "name=busymate"]).code == 200)
        #expect(
            try Command.run(
                "/usr/bin/curl", ["-sS", "--cacert", ourCA, "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/secret"]
            ).status == 0)
        #expect(
            try Command.run(
                "/usr/bin/curl",
                ["-sS", "--cacert", originCA.path, "-x", "http://127.0.0.1:\(port)", "https://127.0.0.1:\(tlsOrigin.port)/tunnel"]
            ).status == 0)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:1/refused").code == 502)

        try waitUntil("five exchanges are stored", timeout: 3) { try listJSON(appliance).count == 5 }
        let rows = try listJSON(appliance)
        let byURL = Dictionary(rows.map { (($0["url"] as? String) ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        let plain = try #require(byURL["http://127.0.0.1:\(origin.port)/plain?x=1"])
        #expect(plain["method"] as? String == "GET")
        #expect(plain["status"] as? Int == 200)
        #expect(plain["tls"] as? String == "none")
        #expect(plain["duration_ms"] is Int)
        #expect((plain["request_id"] as? String)?.count == 36)
        let secret = try #require(byURL["https://localhost:\(tlsOrigin.port)/secret"])
        #expect(secret["tls"] as? String == "mitm")
        #expect(secret["status"] as? Int == 200)
        let tunnel = try #require(byURL["127.0.0.1:\(tlsOrigin.port)"])
        #expect(tunnel["tls"] as? String == "passthrough")
        #expect(tunnel["method"] as? String == "CONNECT")
        // The client was told "200 Connection established".
        #expect(tunnel["status"] as? Int == 200)
        let refused = try #require(byURL["http://127.0.0.1:1/refused"])
        #expect((refused["error"] as? String)?.contains("cannot connect") == true)
        // The client got the proxy's 502, and the row says so.
        #expect(refused["status"] as? Int == 502)

        // Filters.
        #expect(try listJSON(appliance, ["--method", "POST"]).map { $0["url"] as? String } == ["http://127.0.0.1:\(origin.port)/form"])
        #expect(try listJSON(appliance, ["--host", "localhost"]).count == 1)
        #expect(try listJSON(appliance, ["--status", "2xx"]).count == 4)
        #expect(try listJSON(appliance, ["--search", "plain?x"]).count == 1)
        // --search is ~u|~h|~b for the text as written: any case, bodies too.
        #expect(try listJSON(appliance, ["--search", "x-test: ONE"]).count == 1)
        #expect(
            try listJSON(appliance, ["--search", "NAME=BUSYMATE"]).map { $0["url"] as? String } == ["http://127.0.0.1:\(origin.port)/form"])

        // show: headers both ways and the bodies.
        let formID = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/form") == true }?["id"] as? Int)
        let shown = try appliance.cli(["show", "\(formID)"])
        #expect(shown.status == 0)
        #expect(shown.stdout.contains("> POST /form HTTP/1.1"))
        #expect(shown.stdout.contains("name=busymate"))
        #expect(shown.stdout.contains("< 200 OK"))
        #expect(shown.stdout.contains("origin POST /form"))
        let plainShown = try appliance.cli(["show", plain["request_id"] as? String ?? ""])
        #expect(plainShown.stdout.contains("> X-Test: one"))
        // The tunnel row counts bytes both ways.
        let tunnelJSON = try appliance.cli(["show", "--json", "\(tunnel["id"] as? Int ?? 0)"])
        let tunnelObject = try JSONSerialization.jsonObject(with: Data(tunnelJSON.stdout.utf8)) as? [String: Any]
        #expect((tunnelObject?["bytes_up"] as? Int ?? 0) > 0)
        #expect((tunnelObject?["bytes_down"] as? Int ?? 0) > 0)
    }

    /// Auto-pinning: a refusal from a client that has not trusted our CA
    /// for other hosts (a first curl run) pins nothing and says how to trust
    /// it; a client that trusts it for other hosts and refuses this one twice
    /// is pinning: the host is passed through for `pin_ttl`, shown in
    /// `status`, kept across restarts, removable. (Loopback clients pin only
    /// with `ssl_proxying.pin_loopback`, which these settings turn on.)
    @Test func pinsAreStoredListedAndRemovable() async throws {
        let tlsOrigin = try await Origin.tls()
        defer { Task { await tlsOrigin.stop() } }
        let appliance = try Appliance.pinning(tlsOrigin)
        let originCA = try appliance.trust(tlsOrigin)
        let port = try appliance.proxyPort
        let pinningClient = ["-sS", "--cacert", originCA.path, "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/"]
        func refusal(_ count: Int) throws -> String {
            let rows = try appliance.rows("\(count) refusals are stored") {
                $0.filter { ($0["error"] as? String)?.contains("refused the interception") == true }.count == count
            }
            return rows.compactMap { $0["error"] as? String }.first { $0.contains("refused the interception") } ?? ""
        }

        // A fresh client that does not trust us: not pinned, and told how to fix it.
        #expect(try Command.run("/usr/bin/curl", pinningClient).status != 0)
        let fresh = try refusal(1)
        #expect(
            fresh.contains("has not trusted our CA for other hosts lately") && fresh.contains("`curl --cacert \(appliance.caFile.path)`"),
            "\(fresh)")
        #expect(try Command.run("/usr/bin/curl", pinningClient).status != 0)
        #expect(try appliance.cli(["pinned", "list"]).stdout.isEmpty)

        // Once that client trusts our CA for another host, a second refusal of this one is pinning.
        try appliance.trustUsElsewhere(tlsOrigin)
        #expect(try Command.run("/usr/bin/curl", pinningClient).status != 0)
        #expect(try refusal(3).contains("Not pinned yet: if it refuses localhost again within 10 min"))
        #expect(try appliance.cli(["pinned", "list"]).stdout.isEmpty)
        #expect(try Command.run("/usr/bin/curl", pinningClient).status != 0)
        let pinned = try refusal(4)
        #expect(
            pinned.contains("certificate pinning") && pinned.contains("for 24 h") && pinned.contains("busymate pinned remove localhost"),
            "\(pinned)")
        try waitUntil("the pin is stored", timeout: 2) { try appliance.cli(["pinned", "list"]).stdout.contains("localhost") }
        #expect(try Command.run("/usr/bin/curl", pinningClient).status == 0)
        let status = try appliance.cli(["status"])
        #expect(status.stdout.contains("pinned       1 host passed through after refusing our certificate: localhost"), "\(status.stdout)")

        // Pins survive a tunnel restart: they live in the store.
        #expect(try appliance.cli(["tunnel", "restart"]).status == 0)
        try waitUntil("the restarted tunnel serves", timeout: 5) { try Command.run("/usr/bin/curl", pinningClient).status == 0 }

        #expect(try appliance.cli(["pinned", "remove", "localhost"]).status == 0)
        try waitUntil("the host is intercepted again", timeout: 2) { try Command.run("/usr/bin/curl", pinningClient).status != 0 }
        #expect(try appliance.cli(["pinned", "remove", "nothing.example"]).status != 0)

        // Pins expire after ssl_proxying.pin_ttl.
        try appliance.writeSettings(
            Appliance.pinningSettings(trust: originCA)
                .replacingOccurrences(of: #""ssl_proxying": {"#, with: #""ssl_proxying": {"pin_ttl": "2s", "#))
        // The tunnel runs on the new file (a reload forgets what it learned of the client, so it must come first).
        try appliance.waitUntilTunnelApplied(timeout: 5)
        try appliance.trustUsElsewhere(tlsOrigin)
        // Two refusals (the removal forgot the earlier ones), then passed through.
        // Under load a 2 s pin can end between two curls: any pass-through shows it was pinned.
        try waitUntil("pinned again, for 2 s", timeout: 6) {
            let first = try Command.run("/usr/bin/curl", pinningClient).status
            return try first == 0 || Command.run("/usr/bin/curl", pinningClient).status == 0
        }
        try waitUntil("the pin expired", timeout: 6) { try Command.run("/usr/bin/curl", pinningClient).status != 0 }
        // That refusal pinned it again (a pinning client keeps refusing); left alone, the pin ends.
        try waitUntil("the list says it expired", timeout: 5) { try appliance.cli(["pinned", "list"]).stdout.contains("expired") }
        #expect(!(try appliance.cli(["status"]).stdout.contains("pinned ")))
    }
}

extension ApplianceTests {
    @Test func sslProxyingEditsApplyLiveAndKeepUnknownKeys() async throws {
        let tlsOrigin = try await Origin.tls()
        defer { Task { await tlsOrigin.stop() } }
        let appliance = try Appliance(settings: nil)
        let originCA = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            """
            {"future_feature": {"enabled": true}, "proxy": {"listen": ["127.0.0.1:0"]}, "ssl_proxying": {"upstream_trust": "\(originCA.path)"}}
            """)
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = try appliance.status().int("tunnel.pid")
        let viaOurCA = ["-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/"]
        #expect(try Command.run("/usr/bin/curl", viaOurCA).status != 0)

        let added = try appliance.cli(["ssl-proxying", "add", "localhost"])
        #expect(added.status == 0, "\(added.stderr)")
        try waitUntil("localhost is intercepted", timeout: 2) { try Command.run("/usr/bin/curl", viaOurCA).status == 0 }
        let text = try String(contentsOf: appliance.settingsURL, encoding: .utf8)
        #expect(text.contains("\"future_feature\": {\n    \"enabled\": true\n  }"))
        #expect(try appliance.status().value("settings.unknown_keys") as? [String] == ["future_feature"])
        #expect(try appliance.cli(["ssl-proxying", "list"]).stdout.contains("include: localhost"))
        #expect(try appliance.status().int("tunnel.pid") == tunnel)

        let bad = try appliance.cli(["ssl-proxying", "add", "https://example.com"])
        #expect(bad.status != 0 && bad.stderr.contains("without a scheme"))
        #expect(try appliance.cli(["ssl-proxying", "remove", "nothere.example"]).status != 0)
        #expect(try appliance.cli(["ssl-proxying", "remove", "localhost"]).status == 0)
        try waitUntil("localhost is passed through again", timeout: 2) { try Command.run("/usr/bin/curl", viaOurCA).status != 0 }
    }

    @Test func curlIDReproducesTheRequest() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        #expect(
            try Command.curl(
                proxyPort: port, "http://127.0.0.1:\(origin.port)/it's?a=1", extra: ["-d", "x='1'&y=2", "-H", "X-Quote: it's"]
            ).code == 200)
        var id = 0
        try waitUntil("the exchange is stored", timeout: 2) {
            let rows = try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json"]).stdout.utf8)) as? [[String: Any]]
            id = rows?.first?["id"] as? Int ?? 0
            return id > 0
        }
        let command = try appliance.cli(["curl", "\(id)"])
        #expect(command.status == 0, "\(command.stderr)")
        #expect(command.stdout.hasPrefix("curl -g -X 'POST' 'http://127.0.0.1:\(origin.port)/it'\\''s?a=1'"))
        let rerun = try Command.shell("\(command.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) -sS -w '\\n%{http_code}'")
        #expect(rerun.stdout == "origin POST /it's?a=1\n\n200", "\(rerun.stdout) \(rerun.stderr)")
    }

    @Test func retentionKeepsTheNewestExchanges() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"proxy": {"listen": ["127.0.0.1:0"]}, "capture": {"max_exchanges": 3}}
                """)
        try appliance.start()
        let port = try appliance.proxyPort
        for i in 1...6 {
            #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/n\(i)").code == 200)
        }
        try waitUntil("only the newest three are left", timeout: 3) {
            let rows = try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json"]).stdout.utf8)) as? [[String: Any]]
            return rows?.compactMap { ($0["url"] as? String)?.split(separator: "/").last.map(String.init) } == ["n6", "n5", "n4"]
        }
    }

    @Test func tailPrintsNewExchangesAsTheyAreCaptured() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/before").code == 200)
        try waitUntil("the first exchange is stored", timeout: 2) { try appliance.cli(["list"]).stdout.contains("/before") }
        let out = appliance.base.appendingPathComponent("tail.txt")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        let tail = Process()
        tail.executableURL = URL(fileURLWithPath: Command.binary("busymate"))
        tail.arguments = ["tail", "--group", appliance.group.path]
        tail.standardOutput = try FileHandle(forWritingTo: out)
        try tail.runSerialized()
        defer {
            kill(tail.processIdentifier, SIGTERM)
            tail.waitForExit()
        }
        try waitUntil("tail listens", timeout: 3) {
            try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path).contains {
                $0.hasPrefix("cli-")
            }
        }
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
        try waitUntil("tail shows the new exchange", timeout: 3) {
            try String(contentsOf: out, encoding: .utf8).contains("GET 200 http://127.0.0.1:\(origin.port)/after")
        }
        #expect(try !String(contentsOf: out, encoding: .utf8).contains("/before"))
    }

    @Test(
        .enabled(
            if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/update-ca-certificates"),
            "installing into the system trust store needs root"))
    func theCAIsExportedAndInstalledIntoTheSystemTrustStore() async throws {
        let appliance = try Appliance()
        try appliance.start()
        #expect(try appliance.cli(["ca", "path"]).stdout == appliance.caFile.path + "\n")
        let der = appliance.base.appendingPathComponent("exported.der")
        #expect(try appliance.cli(["ca", "export", "--der", "-o", der.path]).status == 0)
        #expect(
            FileManager.default.contents(atPath: der.path)
                == FileManager.default.contents(atPath: appliance.group.appendingPathComponent("ca.der").path))
        #expect(try appliance.cli(["ca", "export"]).stdout.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(try appliance.status().bool("ca.trusted") == false)
        defer { _ = try? appliance.cli(["ca", "uninstall"]) }
        #expect(try appliance.cli(["ca", "install"]).status == 0)
        #expect(try appliance.status().bool("ca.trusted") == true)
        #expect(try appliance.cli(["ca", "uninstall"]).status == 0)
        #expect(try appliance.status().bool("ca.trusted") == false)
    }
}

extension ApplianceTests {
    @Test func harExportIsValidHAR12() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance.intercepting(tlsOrigin)
        let originCA = try appliance.trust(tlsOrigin)
        let port = try appliance.proxyPort
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/q?a=1&b=two").code == 200)
        #expect(
            try Command.curl(
                proxyPort: port, "http://127.0.0.1:\(origin.port)/post", extra: ["-H", "Content-Type: application/json", "-d", "{\"k\":1}"]
            ).code == 200)
        #expect(
            try Command.run(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)",
                    "https://localhost:\(tlsOrigin.port)/tls",
                ]
            ).status == 0)
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:1/down").code == 502)
        #expect(
            try Command.run(
                "/usr/bin/curl",
                ["-sS", "--cacert", originCA.path, "-x", "http://127.0.0.1:\(port)", "https://127.0.0.1:\(tlsOrigin.port)/"]
            ).status == 0)
        try waitUntil("all five are stored", timeout: 3) {
            try appliance.cli(["list"]).stdout.split(separator: "\n").dropFirst().count == 5
        }

        let har = appliance.base.appendingPathComponent("export.har")
        let exported = try appliance.cli(["export", "--har", har.path])
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect(exported.stdout == "wrote 4 exchanges to \(har.path)\n")
        let validator = Command.repoRoot.appendingPathComponent("tests/har/validate.py").path
        let check = try Command.run("/usr/bin/env", ["python3", validator, har.path])
        #expect(check.status == 0, "HAR 1.2 violations: \(check.stdout) \(check.stderr)")

        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: har)) as? [String: Any]
        let entries = (document?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
        let urls = entries.compactMap { ($0["request"] as? [String: Any])?["url"] as? String }
        #expect(
            urls == [
                "http://127.0.0.1:\(origin.port)/q?a=1&b=two", "http://127.0.0.1:\(origin.port)/post",
                "https://localhost:\(tlsOrigin.port)/tls", "http://127.0.0.1:1/down",
            ])
        let query = (entries.first?["request"] as? [String: Any])?["queryString"] as? [[String: String]]
        #expect(query == [["name": "a", "value": "1"], ["name": "b", "value": "two"]])
        let post = (entries[1]["request"] as? [String: Any])?["postData"] as? [String: String]
        #expect(post == ["mimeType": "application/json", "text": "{\"k\":1}"])
        let content = (entries[1]["response"] as? [String: Any])?["content"] as? [String: Any]
        #expect(content?["text"] as? String == "origin POST /post\n")
        #expect((entries[3]["_error"] as? String)?.contains("cannot connect") == true)

        // The checker is strict: a HAR without a response fails it.
        var broken = entries
        broken[0]["response"] = nil
        let bad = appliance.base.appendingPathComponent("broken.har")
        try JSONSerialization.data(withJSONObject: [
            "log": ["version": "1.2", "creator": ["name": "x", "version": "1"], "entries": broken]
        ]).write(to: bad)
        #expect(try Command.run("/usr/bin/env", ["python3", validator, bad.path]).status == 1)
    }
}

extension ApplianceTests {
    @Test func showDecodesAGzipBodyAndRawShowsItAsStored() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        // No --compressed: the client gets the gzip bytes as the origin sent them.
        let fetched = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-x", "http://127.0.0.1:\(port)",
                "http://127.0.0.1:\(origin.port)/gzip",
            ])
        #expect(fetched.stdout.hasPrefix("200 "))
        var id = 0
        try waitUntil("the exchange is stored", timeout: 2) {
            let rows = try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json"]).stdout.utf8)) as? [[String: Any]]
            id = rows?.first?["id"] as? Int ?? 0
            return id > 0
        }
        let shown = try appliance.cli(["show", "\(id)"])
        #expect(shown.stdout.contains("(gzip, "), "\(shown.stdout)")
        // Decoded and pretty-printed as JSON.
        #expect(shown.stdout.contains("{\n  \"compressed\": true,\n  \"n\": 42\n}"), "\(shown.stdout)")
        let raw = try appliance.cli(["show", "--raw", "\(id)"])
        #expect(!raw.stdout.contains("\"compressed\""))
        #expect(raw.stdout.contains("binary data"))
        // As a hex dump, gzip's magic first: never replacement characters.
        #expect(raw.stdout.contains("00000000  1f 8b"), "\(raw.stdout)")
        #expect(!raw.stdout.contains("\u{FFFD}"))
        // Both sizes are in the row: as sent, and decoded.
        let row = try appliance.row(id)
        #expect(row.at("response", "body", "decoded_size") as? Int == "{\"compressed\":true,\"n\":42}".utf8.count)
        let size = row.at("response", "body", "size") as? Int ?? 0
        #expect(size > 0 && size != row.at("response", "body", "decoded_size") as? Int)
        // The body in the JSON is decoded too, as sent by the origin.
        #expect(row.at("response", "body", "text") as? String == "{\"compressed\":true,\"n\":42}")
        #expect(row.at("response", "body", "content_encoding") as? String == "gzip")
    }

    @Test func largeBodiesAreStoredAsFilesCappedAndRemovedByRetention() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]},
                 "capture": {"body_max": "450KiB", "max_bytes": "1MiB"}}

                """)
        try appliance.start()
        let port = try appliance.proxyPort
        let bodiesDir = appliance.group.appendingPathComponent("bodies")
        func newest(_ count: Int) throws -> [String: Any] {
            try appliance.row(try appliance.rows("\(count) exchanges are stored") { $0.count == count }.first?["id"])
        }
        // `show --json` names a body file by its path in the group.
        func fileSize(_ path: Any?) -> Int? {
            guard let path = path as? String else { return nil }
            return (try? FileManager.default.attributesOfItem(atPath: appliance.group.appendingPathComponent(path).path))?[.size] as? Int
        }

        // A 100 KiB upload: too big for the row, so a file, whole.
        let upload = appliance.base.appendingPathComponent("upload.bin")
        let payload = Data((0..<(100 * 1024)).map { UInt8(truncatingIfNeeded: $0 * 7) })
        try payload.write(to: upload)
        let posted = try Command.curl(
            proxyPort: port, "http://127.0.0.1:\(origin.port)/upload", extra: ["--data-binary", "@\(upload.path)"])
        #expect(posted.code == 200)
        let first = try newest(1)
        let uploadPath = first.at("request", "body", "file") as? String
        let uploadFile = uploadPath.map { URL(fileURLWithPath: $0).lastPathComponent }
        #expect(uploadPath == "bodies/\(uploadFile ?? "-")")
        #expect(first.at("request", "body", "size") as? Int == payload.count)
        #expect(first.at("request", "body", "truncated") as? Bool == false)
        #expect(try Data(contentsOf: bodiesDir.appendingPathComponent(uploadFile ?? "-")) == payload)
        #expect(
            try appliance.cli(["show", "\(first["id"] as? Int ?? 0)"]).stdout.contains(
                "(\(payload.count) bytes, stored in bodies/\(uploadFile ?? "-"))"))
        // The JSON carries the whole body (binary: base64), not the row's first bytes.
        #expect(first.at("request", "body", "base64") as? String == payload.base64EncodedString())
        // --save-body writes it byte for byte.
        let saved = appliance.base.appendingPathComponent("saved.bin")
        #expect(try appliance.cli(["show", "\(first["id"] as? Int ?? 0)", "--save-body", "request", saved.path]).status == 0)
        #expect(try Data(contentsOf: saved) == payload)

        // A 1 MiB download: forwarded whole, stored up to body_max, flagged.
        let download = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{size_download}", "-x", "http://127.0.0.1:\(port)",
                "http://127.0.0.1:\(origin.port)/big?mb=1",
            ])
        #expect(download.stdout == "\(1 << 20)")
        let second = try newest(2)
        #expect(second.at("response", "body", "size") as? Int == 1 << 20)
        #expect(second.at("response", "body", "truncated") as? Bool == true)
        #expect(second.at("response", "body", "stored") as? Int == 450 * 1024)
        #expect(fileSize(second.at("response", "body", "file")) == 450 * 1024)

        // Another one takes the store past max_bytes (2 × (450 + 16) KiB
        // + (100 + 16) KiB > 1 MiB): the oldest exchange goes, and its body
        // file with it.
        _ = try Command.run(
            "/usr/bin/curl", ["-sS", "-o", "/dev/null", "-x", "http://127.0.0.1:\(port)", "http://127.0.0.1:\(origin.port)/big?mb=1"])
        let left = try appliance.rows("the upload is pruned") { $0.count == 2 }
        #expect(!left.contains { ($0["url"] as? String)?.hasSuffix("/upload") == true })
        #expect(!FileManager.default.fileExists(atPath: bodiesDir.appendingPathComponent(uploadFile ?? "-").path))
        // What is left: the two kept exchanges' files, and at most the pruned
        // file renamed as a spare for the next body to write over.
        let files = try FileManager.default.contentsOfDirectory(atPath: bodiesDir.path)
        #expect(files.filter { !$0.hasSuffix(".spare") }.count == 2, "\(files)")
        #expect(files.filter { $0.hasSuffix(".spare") }.count <= 1, "\(files)")
    }
}

extension ApplianceTests {
    private func peakAndCurrentRSS(_ pid: Int) -> (peak: Int, current: Int) {
        let status = ProcessProbe.status(Int32(pid))
        func kib(_ key: String) -> Int { Int(status[key]?.split(separator: " ").first ?? "") ?? 0 }
        return (kib("VmHWM"), kib("VmRSS"))
    }

    @Test func aLargeDownloadStreamsWithBoundedTunnelMemory() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let originCA = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Appliance.interceptionSettings(include: ["localhost"], trust: originCA, extra: #", "capture": {"body_max": "4MiB"}"#))
        try appliance.start()
        let port = try appliance.proxyPort
        let tunnel = try appliance.status().int("tunnel.pid") ?? 0
        // Warm up both paths so their one-time allocations are in the baseline.
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/big?mb=1").code == 200)
        #expect(
            try Command.run(
                "/usr/bin/curl",
                [
                    "-sS", "-o", "/dev/null", "--cacert", appliance.caFile.path,
                    "-x", "http://127.0.0.1:\(port)", "https://localhost:\(tlsOrigin.port)/big?mb=1",
                ]
            ).status == 0)
        let before = peakAndCurrentRSS(tunnel)

        let plain = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-x", "http://127.0.0.1:\(port)",
                "http://127.0.0.1:\(origin.port)/big?mb=256",
            ], timeout: 120)
        #expect(plain.stdout == "200 268435456", "\(plain.stderr)")
        let mitm = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                "--cacert", appliance.caFile.path, "-x", "http://127.0.0.1:\(port)",
                "https://localhost:\(tlsOrigin.port)/big?mb=64",
            ], timeout: 120)
        #expect(mitm.stdout == "200 67108864", "\(mitm.stderr)")
        let after = peakAndCurrentRSS(tunnel)
        // 320 MiB went through; the tunnel's peak grew by far less.
        #expect(after.peak - max(before.peak, before.current) < 48 * 1024, "peak RSS \(before.peak) KiB → \(after.peak) KiB")

        // Stored capped, flagged, with the true size.
        let rows =
            try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json", "--limit", "2"]).stdout.utf8)) as? [[String: Any]]
            ?? []
        let id = rows.first { ($0["url"] as? String)?.contains("mb=256") == true }?["id"] as? Int ?? 0
        let shown = try appliance.row(id)
        #expect(shown.at("response", "body", "size") as? Int == 256 << 20)
        #expect(shown.at("response", "body", "truncated") as? Bool == true)
        let file = appliance.group.appendingPathComponent(shown.at("response", "body", "file") as? String ?? "-")
        #expect((try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? Int == 4 << 20)
    }
}

extension ApplianceTests {
    @Test func anUpstreamThatBreaksMidResponseIsRecordedAndTheClientToldByAClose() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let broken = try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/break")
        // curl got the head and 10 bytes, then a close: a transfer error, not a 200 it could trust.
        #expect(broken.result.status != 0)
        var row: [String: Any]?
        try waitUntil("the exchange is stored", timeout: 2) {
            let rows = try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json"]).stdout.utf8)) as? [[String: Any]]
            row = rows?.first
            return row != nil
        }
        #expect(row?["status"] as? Int == 200)
        let error = row?["error"] as? String ?? ""
        #expect(error.contains("the connection to 127.0.0.1:\(origin.port) failed"), "\(error)")
        // The tunnel serves on.
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
    }
}

extension ApplianceTests {
    /// Raw bytes to the proxy from bash's /dev/tcp, then what came back
    /// until the proxy closed, or (`hangUp`) nothing: the client just goes.
    private func raw(_ port: Int, _ bytes: String, hangUp: Bool = false) throws -> String {
        try Command.run(
            "/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port); printf '\(bytes)' >&3; \(hangUp ? "exec 3>&-" : "cat <&3")"],
            timeout: 10
        ).stdout
    }

    @Test func malformedAndOversizedRequestsAreAnsweredAndRecorded() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort

        let garbage = try raw(port, "THIS IS NOT HTTP\\r\\n\\r\\n")
        #expect(garbage.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(garbage)")
        let big = try Command.run(
            "/usr/bin/curl",
            [
                "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", "http://127.0.0.1:\(port)",
                "-H", "X-Big: " + String(repeating: "a", count: 85_000), "http://127.0.0.1:\(origin.port)/",
            ])
        #expect(big.stdout == "431", "\(big.stderr)")
        // A client that promises 1000 bytes, sends 10 and hangs up.
        _ = try raw(
            port, "POST http://127.0.0.1:\(origin.port)/upload HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 1000\\r\\n\\r\\n0123456789",
            hangUp: true)

        let rows = try appliance.rows("three rows are stored") { $0.count == 3 }
        let errors = rows.compactMap { $0["error"] as? String }
        #expect(errors.contains { $0.contains("malformed request") && $0.contains("answered 400") }, "\(errors)")
        #expect(errors.contains { $0.contains("over the limit (64 KiB)") && $0.contains("answered 431") }, "\(errors)")
        #expect(errors.contains { $0.contains("client closed") }, "\(errors)")
        let aborted = rows.first { ($0["url"] as? String)?.hasSuffix("/upload") == true }
        #expect(try appliance.row(aborted?["id"]).at("request", "body", "size") as? Int == 10)
        // And the tunnel serves everyone else as before.
        #expect(try Command.curl(proxyPort: port, "http://127.0.0.1:\(origin.port)/after").code == 200)
    }
}

extension ApplianceTests {
    @Test func resendRepeatsTheRequestThroughTheTunnelAndLinksTheNewRow() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance.intercepting(tlsOrigin)
        let port = try appliance.proxyPort

        #expect(
            try Command.curl(
                proxyPort: port, "http://127.0.0.1:\(origin.port)/form", extra: ["-H", "X-Mine: 1", "--data-binary", "a=1&b=2"]
            ).code == 200)
        #expect(
            try Command.curl(proxyPort: port, "https://localhost:\(tlsOrigin.port)/api", extra: ["--cacert", appliance.caFile.path]).code
                == 200)
        var rows = try appliance.rows("both exchanges are stored") { $0.filter { $0["method"] as? String != "CONNECT" }.count == 2 }
        let form = rows.first { ($0["url"] as? String)?.hasSuffix("/form") == true } ?? [:]
        let api = rows.first { ($0["url"] as? String)?.hasSuffix("/api") == true } ?? [:]

        for original in [form, api] {
            let r = try appliance.cli(["resend", "\(original["id"] as? Int ?? 0)"])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout.contains(": 200 OK"), "\(r.stdout)")
            #expect(r.stdout.contains("recorded as exchange"), "\(r.stdout)")
        }
        rows = try appliance.rows()
        for original in [form, api] {
            let copies = rows.filter { $0["resent_from"] as? Int == original["id"] as? Int }
            #expect(copies.count == 1, "\(rows)")
            let copy = try appliance.row(copies.first?["id"])
            #expect(copy["url"] as? String == original["url"] as? String)
            #expect(copy["method"] as? String == original["method"] as? String)
            #expect(copy["status"] as? Int == 200)
            let headers = copy.headerLines("request")
            #expect(
                !headers.contains { $0.lowercased().hasPrefix("x-busymate-resent-from") },
                "the marker is recorded as resent_from, not as a header")
            if original["method"] as? String == "POST" {
                #expect(headers.contains("X-Mine: 1"))
                #expect(copy.at("request", "body", "text") as? String == "a=1&b=2")
            } else {
                #expect(copy["tls"] as? String == "mitm")
            }
        }
    }
}

extension ApplianceTests {
    @Test func aNameThatDoesNotResolveGetsA502AndARowThatSaysDNS() async throws {
        // In a network namespace of the test's own: no DNS server is reachable.
        let appliance = try Appliance(isolatedNetwork: true)
        try appliance.start()
        let plain = try appliance.curl("http://nonexistent.invalid/page")
        #expect(plain.code == 502, "\(plain.result.stderr)")
        #expect(plain.body.contains("DNS lookup failed"), "\(plain.body)")
        let tunnel = try appliance.curl("https://nonexistent.invalid/")
        #expect(tunnel.result.stderr.contains("502"), "\(tunnel.result.stderr)")

        for row in try appliance.rows("both failures are stored", until: { $0.count == 2 }) {
            #expect(row["host"] as? String == "nonexistent.invalid")
            #expect((row["error"] as? String)?.contains("DNS lookup failed") == true, "\(row)")
        }
        // Everyone else is still served: the tunnel answers on its own port.
        #expect(try appliance.curl("http://127.0.0.1:1/").code == 502)
    }
}
