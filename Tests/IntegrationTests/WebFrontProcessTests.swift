import BusymateShared
import Foundation
import Testing

/// `busymate-web` as the supervisor keeps it: unprivileged on the socket
/// the supervisor bound, replaced without refusing a connection, stopped
/// and started with its port, adopted by a new supervisor, and acting on
/// held messages through the same path as the CLI.
@Suite(.serialized) struct WebFrontProcessTests {
    static func code(_ url: String, _ extra: [String] = []) throws -> String {
        try Command.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"] + extra + [url]).stdout
    }

    @Test func theWebFrontServesUnprivilegedAndOnlyWithItsToken() async throws {
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let status = try appliance.status()
        let pid = try #require(status.int("web.pid"))
        let proc = ProcessProbe.status(Int32(pid))
        #expect(proc["Uid"]?.split(separator: "\t").first != "0", "\(proc["Uid"] ?? "")")
        #expect(proc["CapEff"] == "0000000000000000")
        #expect(proc["NoNewPrivs"] == "1")
        let base = try appliance.webBase
        #expect(try Self.code(base + "/api/exchanges") == "401")
        #expect(try Self.code(base + "/") == "303")
        // The token file: 0640, and the URL the CLI prints opens the page.
        var st = stat()
        #expect(stat(appliance.group.appendingPathComponent("web-token").path, &st) == 0 && st.st_mode & 0o777 == 0o640)
        let url = try appliance.cli(["web", "url"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url.hasPrefix(base + "/login?token="))
        let jar = appliance.group.deletingLastPathComponent().appendingPathComponent("cookies").path
        #expect(try Self.code(url, ["-L", "-c", jar]) == "200")
        #expect(try Self.code(base + "/api/status", ["-b", jar]) == "200")
        #expect(try appliance.cli(["status"]).stdout.contains("web          ready, pid \(pid)"))
        // Rotation: remove the token and restart the web front; the old cookie stops working.
        unlink(appliance.group.appendingPathComponent("web-token").path)
        #expect(try appliance.cli(["web", "restart"]).status == 0)
        try waitUntil("the new web front serves", timeout: 10) {
            let s = try appliance.status()
            return s.string("web.state") == "ready" && s.int("web.pid") != pid && appliance.webPIDs().count == 1
        }
        #expect(try Self.code(base + "/api/status", ["-b", jar]) == "401")
        let rotated = try appliance.cli(["web", "url"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(rotated != url)
        #expect(try Self.code(rotated, ["-L", "-c", jar]) == "200")
    }

    @Test func aWebRestartRefusesNoConnectionAndStopClosesThePort() async throws {
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let base = try appliance.webBase
        let first = try appliance.status().int("web.pid")
        // Requests all along, while the web front is replaced three times.
        let load = try Command.start(
            "/bin/sh",
            [
                "-c",
                "for i in $(seq 1 300); do curl -sS -o /dev/null -w '%{http_code} %{exitcode}\\n' --max-time 5 \(base)/login 2>&1; done",
            ],
            in: appliance.group.deletingLastPathComponent())
        for _ in 0..<3 {
            #expect(try appliance.cli(["web", "restart"]).status == 0)
            try await Task.sleep(for: .milliseconds(300))
        }
        let codes = try load.finish(timeout: 120).stdout.split(separator: "\n")
        #expect(codes.count == 300 && codes.allSatisfy { $0 == "200 0" }, "\(Dictionary(grouping: codes, by: { $0 }).mapValues(\.count))")
        try waitUntil("one web front, a new one", timeout: 10) {
            let now = try appliance.status().int("web.pid")
            return appliance.webPIDs().count == 1 && now != first
        }
        #expect(try appliance.status().int("web.restarts") == 3)

        #expect(try appliance.cli(["web", "stop"]).status == 0)
        try waitUntil("the web front is gone", timeout: 10) { appliance.webPIDs().isEmpty }
        #expect(try Self.code(base + "/login") == "000")
        #expect(try appliance.status().string("web.state") == "stopped")
        #expect(try appliance.cli(["web", "start"]).status == 0)
        try waitUntil("the web front serves again", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        #expect(try Self.code(try appliance.webBase + "/login") == "200")
    }

    @Test func aNewSupervisorAdoptsTheRunningWebFront() async throws {
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let base = try appliance.webBase
        let pid = try appliance.status().int("web.pid")
        appliance.killSupervisor()
        #expect(try Self.code(base + "/login") == "200")
        try appliance.start()
        try waitUntil("the new supervisor adopts it", timeout: 10) { try appliance.status().bool("web.adopted") == true }
        #expect(try appliance.status().int("web.pid") == pid)
        #expect(appliance.webPIDs() == [Int32(pid ?? 0)])
        #expect(try appliance.webBase == base)
        // Its socket is the supervisor's again: a restart keeps the port.
        #expect(try appliance.cli(["web", "restart"]).status == 0)
        try waitUntil("a new web front serves", timeout: 10) {
            let s = try appliance.status()
            return s.string("web.state") == "ready" && s.int("web.pid") != pid && appliance.webPIDs().count == 1
        }
        #expect(try appliance.webBase == base)
        #expect(try Self.code(base + "/login") == "200")
    }

    @Test func aCrashedWebFrontIsRestartedAndCaptureGoesOn() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let pid = try #require(try appliance.status().int("web.pid"))
        kill(Int32(pid), SIGKILL)
        #expect(try appliance.curl("http://127.0.0.1:\(origin.port)/during").code == 200)
        try waitUntil("a new web front", timeout: 10) {
            let s = try appliance.status()
            return s.string("web.state") == "ready" && s.int("web.pid") != pid
        }
        #expect(appliance.log.contains("the web front exited unexpectedly"))
    }
}

/// A large HAR import against the real web front and tunnel (issue 21:
/// 300,000 entries took 4 GB, held the store's lock, and retention then
/// removed the captured exchanges).
extension WebFrontProcessTests {
    /// A HAR file of `entries` small exchanges, as a browser writes one.
    static func har(_ appliance: Appliance, entries: Int) throws -> URL {
        var text = #"{"log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "pages": [], "entries": ["#
        for i in 0..<entries {
            if i > 0 { text += ",\n" }
            text +=
                #"{"startedDateTime": "2026-01-01T00:00:00.000Z", "time": 12, "request": {"method": "GET", "#
                + #""url": "https://imported.example.com/items/\#(i)", "httpVersion": "HTTP/1.1", "headers": [{"name": "Accept", "value": "*/*"}]}, "#
                + #""response": {"status": 200, "statusText": "OK", "headers": [{"name": "Content-Type", "value": "application/json"}], "#
                + #""content": {"size": 40, "mimeType": "application/json", "text": "{\"id\": \#(i), \"name\": \"item number \#(i)\"}"}}}"#
        }
        text += "]}}"
        let url = appliance.base.appendingPathComponent("import-\(entries).har")
        try Data(text.utf8).write(to: url)
        return url
    }

    static func importHAR(_ appliance: Appliance, _ file: URL) throws -> (code: Int, json: [String: Any]) {
        let token = try String(contentsOf: appliance.group.appendingPathComponent("web-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let r = try Command.run(
            "/usr/bin/curl",
            [
                "-s", "-X", "POST", "-H", "Authorization: Bearer \(token)", "--data-binary", "@\(file.path)",
                "-w", "\n%{http_code}", "--max-time", "120", try appliance.webBase + "/api/har?name=\(file.lastPathComponent)",
            ])
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let json = (try? JSONSerialization.jsonObject(with: Data(lines.dropLast().joined(separator: "\n").utf8))) as? [String: Any] ?? [:]
        return (Int(lines.last ?? "") ?? 0, json)
    }

    /// Rows in the store: captured and imported, read with Python's sqlite3.
    static func storeCounts(_ appliance: Appliance, path: String = "%") throws -> (captured: Int, imported: Int) {
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], timeout=10)
            print(*c.execute("SELECT count(*) - count(imported), count(imported) FROM exchanges WHERE path LIKE ?", (sys.argv[2],)).fetchone())
            """
        let r = try Command.run("/usr/bin/python3", ["-c", script, appliance.group.appendingPathComponent("capture.sqlite").path, path])
        let numbers = r.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard numbers.count == 2 else { throw Failure("cannot count the store's rows: \(r.stdout) \(r.stderr)") }
        return (numbers[0], numbers[1])
    }

    static func kilobytes(_ value: String?) -> Int { Int(value?.split(separator: " ").first ?? "") ?? 0 }

    @Test func aLargeHARImportIsBoundedLetsCaptureGoOnAndNeverEvictsCapturedExchanges() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"log_level": "info", "proxy": {"listen": ["127.0.0.1:0"]}, "tunnel": {"drain_seconds": 2}, "capture": {"max_exchanges": 50000}}
                """)
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let pid = Int32(try #require(try appliance.status().int("web.pid")))
        for i in 0..<5 { #expect(try appliance.curl("http://127.0.0.1:\(origin.port)/before/\(i)").code == 200) }
        try waitUntil("5 captured rows", timeout: 5) { try Self.storeCounts(appliance) == (5, 0) }
        let resident = Self.kilobytes(ProcessProbe.status(pid)["VmRSS"])

        // More entries than the store has room for: refused, saying how many fit; nothing kept.
        let tooMany = try Self.importHAR(appliance, try Self.har(appliance, entries: 60_000))
        #expect(tooMany.code == 409)
        #expect((tooMany.json["error"] as? String)?.contains("room for 49995 more") == true, "\(tooMany.json)")
        #expect(try Self.storeCounts(appliance) == (5, 0))

        // 40,000 entries (10 MB) while capture goes on: all stored, every captured row kept.
        let file = try Self.har(appliance, entries: 40_000)
        let live = try Command.start(
            "/bin/sh",
            [
                "-c",
                """
                for i in $(seq 1 20); do curl -s -o /dev/null -w '%{http_code}\\n' --max-time 10 -x http://127.0.0.1:\(try appliance.proxyPort) \
                  http://127.0.0.1:\(origin.port)/during/$i; sleep 0.1; done
                """,
            ], in: appliance.base)
        let started = Date()
        let imported = try Self.importHAR(appliance, file)
        let seconds = Date().timeIntervalSince(started)
        #expect(imported.code == 200 && imported.json["imported"] as? Int == 40_000, "\(imported)")
        let codes = try live.finish(timeout: 60).stdout.split(separator: "\n")
        #expect(codes.count == 20 && codes.allSatisfy { $0 == "200" }, "\(codes)")
        try waitUntil("every captured row", timeout: 10) { try Self.storeCounts(appliance) == (25, 40_000) }
        // The web front read it an entry at a time: its peak is far from the file's tree (75 times the file).
        let peak = Self.kilobytes(ProcessProbe.status(pid)["VmHWM"])
        let size = (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0) / 1024
        #expect(peak - resident < 160 * 1024, "peak \(peak) kB, \(resident) kB before, a file of \(size) kB, \(seconds) s")
        print(
            "HAR import: \(size) kB, 40000 entries in \(String(format: "%.1f", seconds)) s; web front \(resident) kB before, peak \(peak) kB"
        )

        // The store full to capture.max_exchanges by an import: capture goes on within it.
        let rest = try Self.importHAR(appliance, try Self.har(appliance, entries: 9_975))
        #expect(rest.code == 200, "\(rest)")
        for i in 0..<10 { #expect(try appliance.curl("http://127.0.0.1:\(origin.port)/after/\(i)").code == 200) }
        try waitUntil("the newest captured rows", timeout: 10) { try Self.storeCounts(appliance, path: "/after/%").captured == 10 }
        let counts = try Self.storeCounts(appliance)
        #expect(counts.captured + counts.imported == 50_000, "\(counts)")
    }
}

/// The page's actions go through the same paths as the CLI's, against the
/// real tunnel.
extension WebFrontProcessTests {
    /// curl to the web front with the token as a bearer (a script's way in).
    static func api(_ appliance: Appliance, _ method: String, _ path: String, body: String? = nil) throws -> (
        code: Int, json: [String: Any]
    ) {
        let token = try String(contentsOf: appliance.group.appendingPathComponent("web-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        var args = ["-s", "-X", method, "-H", "Authorization: Bearer \(token)", "-w", "\n%{http_code}", "--max-time", "15"]
        if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
        let r = try Command.run("/usr/bin/curl", args + [try appliance.webBase + path])
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let json = (try? JSONSerialization.jsonObject(with: Data(lines.dropLast().joined(separator: "\n").utf8))) as? [String: Any] ?? [:]
        return (Int(lines.last ?? "") ?? 0, json)
    }

    @Test func aHeldRequestEditedBadlyInThePageStaysHeldAndAGoodEditReachesTheOrigin() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: """
                {"proxy": {"listen": ["127.0.0.1:0"]}, "web": {"listen": "127.0.0.1:0"},
                 "breakpoints": {"request": ["127.0.0.1:\(origin.port)/echo-body/held*"], "timeout_seconds": 60}}
                """)
        try appliance.start()
        try waitUntil("the web front is ready", timeout: 10) { try appliance.status().string("web.state") == "ready" }
        let base = "http://127.0.0.1:\(origin.port)/echo-body"
        let client = try appliance.startCurl(["-d", "hello=1", "\(base)/held/a"])
        var held: [[String: Any]] = []
        try waitUntil("the page's API lists the held request", timeout: 5) {
            held = try Self.api(appliance, "GET", "/api/held").json["held"] as? [[String: Any]] ?? []
            return held.count == 1
        }
        let id = held[0]["id"] as? Int ?? 0
        let raw = held[0]["raw"] as? String ?? ""
        #expect(raw.hasPrefix("POST \(base)/held/a HTTP/1.1\r\n") && raw.hasSuffix("hello=1"))
        // Its deadline, for a countdown: paused_at + timeout_seconds (60).
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let paused = (held[0]["paused_at"] as? String).flatMap { iso.date(from: $0) }
        let expires = (held[0]["expires_at"] as? String).flatMap { iso.date(from: $0) }
        #expect(paused != nil && expires.map { abs($0.timeIntervalSince(paused ?? .distantPast) - 60) < 0.01 } == true, "\(held[0])")
        // A header line that is no header: refused with its line, still held.
        let broken = raw.replacingOccurrences(of: "\r\n\r\n", with: "\r\nnot a header\r\n\r\n")
        let refused = try Self.api(appliance, "POST", "/api/held/\(id)", body: try Self.json(["action": "continue", "raw": broken]))
        #expect(refused.code == 422, "\(refused)")
        let lines = broken.components(separatedBy: "\r\n")
        #expect(refused.json["line"] as? Int == (lines.firstIndex(of: "not a header") ?? -1) + 1, "\(refused.json)")
        #expect(client.isRunning)
        #expect((try Self.api(appliance, "GET", "/api/held").json["held"] as? [[String: Any]])?.count == 1)
        // A good edit goes on; the origin gets it.
        let edited = raw.replacingOccurrences(of: "hello=1", with: "hello=page")
        let done = try Self.api(appliance, "POST", "/api/held/\(id)", body: try Self.json(["action": "continue", "raw": edited]))
        #expect(done.code == 200 && done.json["outcome"] as? String == "edited", "\(done)")
        #expect(try client.finish().stdout == "origin POST /echo-body/held/a\nhello=page\n200")
        // Compose and resend through the tunnel: captured, the resend linked.
        let composed = try Self.api(
            appliance, "POST", "/api/compose", body: try Self.json(["method": "PUT", "url": "\(base)/composed", "body": "new"]))
        #expect(composed.code == 200 && composed.json["status"] as? Int == 200, "\(composed)")
        let rows = try appliance.rows("the composed exchange is stored") {
            $0.contains { ($0["url"] as? String)?.hasSuffix("/composed") == true }
        }
        let original = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/composed") == true }?["id"] as? Int)
        #expect(rows.first { $0["id"] as? Int == original }?["method"] as? String == "PUT")
        let resent = try Self.api(appliance, "POST", "/api/exchanges/\(original)/resend", body: try Self.json(["body": "changed"]))
        #expect(resent.code == 200, "\(resent)")
        let after = try appliance.rows("the resend is stored, linked") { $0.contains { $0["resent_from"] as? Int == original } }
        let copy = try #require(after.first { $0["resent_from"] as? Int == original })
        #expect(copy["method"] as? String == "PUT" && copy["request_size"] as? Int == 7)
    }

    static func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }
}
