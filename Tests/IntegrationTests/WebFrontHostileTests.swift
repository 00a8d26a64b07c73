import BusymateShared
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The web front against clients that are slow on purpose or by nature:
/// slowloris heads, a download read slowly, queries that scan the store,
/// devices fetching the PAC. Each is answered without keeping the page from
/// anyone else.
@Suite(.serialized) struct WebFrontHostileTests {
    static let script = Command.repoRoot.appendingPathComponent("tests/hostile/web.py").path

    static func token(_ appliance: Appliance) throws -> String {
        try String(contentsOf: appliance.group.appendingPathComponent("web-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    static func port(_ base: String) -> Int { Int(base.split(separator: ":").last ?? "") ?? 0 }

    /// curl with the token; (HTTP code, seconds taken).
    static func timed(_ appliance: Appliance, _ path: String, maxTime: Int = 30) throws -> (code: String, seconds: Double) {
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", "--max-time", "\(maxTime)",
                "-H", "Authorization: Bearer \(try token(appliance))", try appliance.webBase + path,
            ])
        let parts = r.stdout.split(separator: " ")
        return (String(parts.first ?? ""), Double(parts.last ?? "") ?? -1)
    }

    static func webPID(_ appliance: Appliance) throws -> Int32 { Int32(try #require(try appliance.status().int("web.pid"))) }

    @Test func aSlowlorisGetsA408AndCannotKeepThePageFromItsUser() async throws {
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let port = Self.port(try appliance.webBase)
        // More connections than the web front serves at once, each adding a
        // byte to its request head every 2 s (under the 30 s of silence).
        let loris = try Command.start("/usr/bin/python3", [Self.script, "slowloris", "\(port)", "1100", "2", "16"], in: appliance.base)
        defer { loris.process.terminate() }
        try waitUntil("the connections are open", timeout: 20) { loris.stdout.hasPrefix("open ") }
        #expect(loris.stdout.hasPrefix("open 1100"), "\(loris.stdout)")
        // The page's user still gets in, at once.
        let status = try Self.timed(appliance, "/api/status", maxTime: 5)
        #expect(status.code == "200" && status.seconds < 2, "\(status)")
        let report = try loris.finish(timeout: 40).stdout.split(separator: "\n").last.map(String.init) ?? ""
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.utf8)) as? [String: Any], "\(report)")
        // Every one is closed within the head deadline (10 s), most with a 408.
        #expect(json["closed"] as? Int == 1100, "\(json)")
        #expect((json["timeouts"] as? Int ?? 0) >= 900, "\(json)")
        #expect((json["longest"] as? Double ?? 99) < 13, "\(json)")
        #expect(try Self.timed(appliance, "/api/status", maxTime: 5).code == "200")
    }

    @Test func aLargeExportIsStreamedInBoundedMemoryAndNotCutWhileReadSlowly() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let proxy = try appliance.proxyPort
        // 80 MiB of bodies, 2 MiB each.
        for _ in 0..<40 {
            #expect(try Command.curl(proxyPort: proxy, "http://127.0.0.1:\(origin.port)/big?mb=2", extra: ["-o", "/dev/null"]).code == 200)
        }
        try waitUntil("the forty are stored", timeout: 10) {
            try appliance.cli(["list", "--json"]).stdout.split(separator: "\n").count >= 40
        }
        let web = try Self.webPID(appliance)
        let before = rssKiB(web)
        // Nothing read for 33 s: past the 30 s a silent connection is given.
        let out = appliance.base.appendingPathComponent("slow.har")
        let reader = try Command.start(
            "/usr/bin/python3",
            [
                Self.script, "slowread", "\(Self.port(try appliance.webBase))", "/api/har",
                try Self.token(appliance), "33", out.path,
            ], in: appliance.base)
        let line = try reader.finish(timeout: 90).stdout.split(separator: "\n").last.map(String.init) ?? ""
        let result = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        #expect(result["status"] as? Int == 200 && result["error"] is NSNull, "\(result)")
        let peak = Int(ProcessProbe.status(web)["VmHWM"]?.split(separator: " ").first ?? "0") ?? 0
        #expect(peak - before < 48 * 1024, "the web front grew from \(before) KiB to a peak of \(peak) KiB for an 80 MiB export")
        // Whole, valid, every entry with its body.
        let validator = Command.repoRoot.appendingPathComponent("tests/har/validate.py").path
        let check = try Command.run("/usr/bin/env", ["python3", validator, out.path], timeout: 120)
        #expect(check.status == 0, "HAR 1.2 violations: \(check.stdout.prefix(2000)) \(check.stderr.prefix(2000))")
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any]
        let entries = (document?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
        let big = entries.filter { ($0["request"] as? [String: Any])?["url"] as? String == "http://127.0.0.1:\(origin.port)/big?mb=2" }
        #expect(big.count == 40)
        let sizes = big.map { (($0["response"] as? [String: Any])?["content"] as? [String: Any])?["text"] as? String ?? "" }.map(
            \.utf8.count)
        #expect(sizes.allSatisfy { $0 == 2 << 20 }, "\(sizes.prefix(5))")
        // Oldest first, as before.
        let started = entries.compactMap { $0["startedDateTime"] as? String }
        #expect(started == started.sorted())
    }

    /// A HAR file of `count` GETs whose URLs hold `length` a's: a regular
    /// expression that backtracks over them costs milliseconds a row.
    static func slowHAR(count: Int, length: Int) throws -> Data {
        let a = String(repeating: "a", count: length)
        let entries: [[String: Any]] = (0..<count).map { i in
            [
                "startedDateTime": "2026-01-01T00:00:\(String(format: "%02d", i % 60)).000Z",
                "request": ["method": "GET", "url": "http://slow.test/\(a)/\(i)", "headers": [] as [Any]],
                "response": ["status": 200, "headers": [] as [Any]],
            ]
        }
        return try JSONSerialization.data(withJSONObject: ["log": ["version": "1.2", "entries": entries]])
    }

    @Test func aSlowQueryNeitherHoldsUpCheapReadsNorOutlivesItsClient() async throws {
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let har = appliance.base.appendingPathComponent("slow.har")
        try Self.slowHAR(count: Self.slowRows, length: Self.slowLength).write(to: har)
        let imported = try Command.run(
            "/usr/bin/curl",
            [
                "-s", "-H", "Authorization: Bearer \(try Self.token(appliance))", "--data-binary", "@\(har.path)",
                "--max-time", "60", try appliance.webBase + "/api/har?name=slow.har",
            ])
        #expect(
            imported.stdout.contains("\"imported\":\(Self.slowRows)") || imported.stdout.contains("\"imported\": \(Self.slowRows)"),
            "\(imported.stdout)")
        let filter = Self.slowFilter.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let url = try appliance.webBase + "/api/exchanges?filter=\(filter)"
        let auth = "Authorization: Bearer \(try Self.token(appliance))"
        // Two slow queries at once, as the page and a script might.
        let slow = try (0..<2).map { _ in
            try Command.start(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "120", "-H", auth, url], in: appliance.base)
        }
        usleep(1_000_000)
        // Cheap reads are answered meanwhile, at once.
        for path in ["/api/status", "/api/exchanges?limit=50", "/api/exchanges/1", "/api/exchanges?filter=~c%20200"] {
            let cheap = try Self.timed(appliance, path, maxTime: 30)
            #expect(cheap.code == "200" && cheap.seconds < 1.5, "\(path): \(cheap)")
        }
        // Their clients leave: the queries stop, and the web front is idle again.
        let web = try Self.webPID(appliance)
        for client in slow { kill(client.process.processIdentifier, SIGKILL) }
        try waitUntil("both queries are stopped", timeout: 3) {
            appliance.log.components(separatedBy: "a request stopped: its client left").count - 1 >= 2
        }
        let cpu = cpuSeconds(web)
        usleep(2_000_000)
        #expect(cpuSeconds(web) - cpu < 0.5, "the web front still works for clients that left")
    }

    /// Rows, URL length and filter for a query that backtracks for minutes
    /// in all, about 80 ms a row: under the 0.5 s a regular expression may
    /// run on one value (200 a's took 1.4 s, and the query was refused).
    static let slowRows = 4_000
    static let slowLength = 100
    static let slowFilter = "~u a.*a.*a.*z"

    @Test func thePACIsServedFromTheSettingsInForce() async throws {
        let settings =
            #"{"log_level": "debug", "proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"}, "onboarding": {"listen": "127.0.0.1:0"}}"#
        let appliance = try Appliance(settings: settings)
        try appliance.start()
        try waitUntil("the onboarding listener is up", timeout: 10) { try appliance.status().string("web.onboarding.bound") != nil }
        let pac = "http://\(try #require(try appliance.status().string("web.onboarding.bound")))/proxy.pac"
        func fetch() throws -> String { try Command.run("/usr/bin/curl", ["-sS", "--max-time", "5", pac]).stdout }
        #expect(try fetch().contains(#"return "PROXY 127.0.0.1:0; DIRECT";"#))
        // A save that does not parse: the settings in force still answer
        // (not the defaults' 127.0.0.1:9090).
        try Data("{\"proxy\": {\"listen\": [".utf8).write(to: appliance.settingsURL)
        usleep(1_000_000)
        let broken = try fetch()
        #expect(broken.contains(#"return "PROXY 127.0.0.1:0; DIRECT";"#), "\(broken)")
        #expect(try appliance.status().string("web.onboarding.warning") == nil)
        // A good save is picked up: no listener on this address now, and the
        // PAC is refused with why (never a bare DIRECT, which would bypass capture unseen).
        try AtomicFile.write(
            Data(
                #"{"proxy": {"listen": ["127.0.0.2:0"]}, "web": {"listen": "127.0.0.1:0"}, "onboarding": {"listen": "127.0.0.1:0"}}"#.utf8),
            to: appliance.settingsURL, mode: 0o664)
        try waitUntil("the new settings are served", timeout: 5) { try fetch().contains("no proxy listener serves 127.0.0.1") }
        let refused = try Command.run("/usr/bin/curl", ["-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", pac]).stdout
        let body = try fetch()
        #expect(refused == "503" && !body.contains("FindProxyForURL"), "\(refused) \(body)")
        // status says so: the line, and the JSON field the page shows.
        try waitUntil("status warns", timeout: 5) {
            try appliance.status().string("web.onboarding.warning")?.contains("127.0.0.2:0") == true
        }
        #expect(
            try appliance.cli(["status"]).stdout.contains(
                "⚠ onboarding   devices that open the onboarding listener (127.0.0.1:0) are refused a PAC"))
    }
}
