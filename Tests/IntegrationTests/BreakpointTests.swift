import Crypto
import Foundation
import Testing

/// Breakpoints end to end: settings.json → the tunnel holds a message →
/// `busymate breakpoints` resolves it → what curl (or a raw client) gets,
/// and what the store keeps.
extension ApplianceTests {
    private static func breakpointSettings(
        request: [String] = [], response: [String] = [], timeout: Int = 60, include: [String] = ["localhost"],
        trust: URL? = nil
    ) -> String {
        func list(_ items: [String]) -> String { "[" + items.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        return Appliance.interceptionSettings(
            include: include, trust: trust,
            extra: ", \"breakpoints\": {\"request\": \(list(request)), \"response\": \(list(response)), \"timeout_seconds\": \(timeout)}")
    }

    @Test func aHeldRequestGoesOnAsItWasEditedFromAFileOrInTheEditor() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.breakpointSettings(request: ["127.0.0.1:\(origin.port)/echo-body/held*"]))
        try appliance.start()
        let base = "http://127.0.0.1:\(origin.port)/echo-body"

        // As it was: held (the origin has not seen it, curl waits), then sent on.
        let first = try appliance.startCurl(["-d", "hello=1", "\(base)/held/a"])
        let held = try appliance.held(1)
        #expect(held[0]["kind"] as? String == "request" && held[0]["url"] as? String == "\(base)/held/a")
        let id = held[0]["id"] as? Int ?? 0
        let raw = try appliance.cli(["breakpoints", "show", "\(id)"]).stdout
        #expect(
            raw.hasPrefix("POST \(base)/held/a HTTP/1.1\r\n") && raw.contains("Content-Length: 7\r\n") && raw.hasSuffix("\r\n\r\nhello=1"),
            "\(raw)")
        usleep(300_000)
        #expect(first.isRunning, "the request went on while held")
        // `status` says something is held.
        try waitUntil("status counts the held request", timeout: 2) { try appliance.status().int("counters.breakpoints_held") == 1 }
        #expect(try appliance.cli(["status"]).stdout.contains("breakpoints  1 held"))
        // An unheld request meanwhile goes straight through.
        #expect(try appliance.curl("\(base)/free").code == 200)
        let continued = try appliance.cli(["breakpoints", "continue", "\(id)"])
        #expect(continued.status == 0 && continued.stdout.contains("continued"), "\(continued.stderr)")
        let firstDone = try first.finish()
        #expect(firstDone.stdout == "origin POST /echo-body/held/a\nhello=1\n200", "\(firstDone.stderr)")

        // From a file, with a wrong Content-Length and bare LFs: re-framed, sent as edited.
        let second = try appliance.startCurl(["-d", "short", "\(base)/held/b"])
        let secondID = try appliance.held(1)[0]["id"] as? Int ?? 0
        let edit = appliance.base.appendingPathComponent("edit.http")
        try Data(
            "PUT \(base)/held/edited?x=1 HTTP/1.1\nHost: 127.0.0.1:\(origin.port)\nContent-Length: 2\nX-Edited: yes\n\na much longer body"
                .utf8
        ).write(to: edit)
        let edited = try appliance.cli(["breakpoints", "continue", "\(secondID)", "--raw-file", edit.path])
        #expect(edited.status == 0 && edited.stdout.contains("edited"), "\(edited.stderr)")
        #expect(try second.finish().stdout == "origin PUT /echo-body/held/edited?x=1\na much longer body\n200")
        let final = try appliance.cli(["breakpoints", "show", "--final", "\(secondID)"]).stdout
        #expect(final.contains("Content-Length: 18\r\n") && final.contains("X-Edited: yes\r\n"), "\(final)")

        // In $EDITOR (a script standing in for a person), after an edit that does not parse was refused.
        let third = try appliance.startCurl(["-d", "body", "\(base)/held/c"])
        let thirdID = try appliance.held(1)[0]["id"] as? Int ?? 0
        let broken = appliance.base.appendingPathComponent("broken.http")
        try Data("POST \(base)/held/c HTTP/1.1\r\nthis is not a header\r\n\r\nbody".utf8).write(to: broken)
        let refused = try appliance.cli(["breakpoints", "continue", "\(thirdID)", "--raw-file", broken.path])
        #expect(refused.status != 0 && refused.stderr.contains("line 2") && refused.stderr.contains("stays held"), "\(refused.stderr)")
        #expect(try appliance.held(1)[0]["id"] as? Int == thirdID)
        #expect(third.isRunning)
        let editor = appliance.base.appendingPathComponent("editor.sh")
        try Data("#!/bin/sh\nsed -i -e 's|/held/c|/held/from-editor|' -e 's|^body$|edited in the editor|' \"$1\"\n".utf8).write(to: editor)
        chmod(editor.path, 0o755)
        var env = ProcessInfo.processInfo.environment
        env["EDITOR"] = editor.path
        env.removeValue(forKey: "VISUAL")
        let inEditor = try Command.run(
            Command.binary("busymate"), ["breakpoints", "continue", "\(thirdID)", "--edit", "--group", appliance.group.path],
            environment: env)
        #expect(inEditor.status == 0, "\(inEditor.stderr)")
        #expect(try third.finish().stdout == "origin POST /echo-body/held/from-editor\nedited in the editor\n200")

        // The store: the rows show what went upstream; the events how each was resolved.
        let rows = try appliance.rows("four exchanges are stored") { $0.count >= 4 }
        let editedRow = rows.first { ($0["url"] as? String)?.hasSuffix("/held/edited?x=1") == true && $0["method"] as? String == "PUT" }
        #expect(editedRow != nil)
        let shown = try appliance.cli(["show", "\(editedRow?["id"] as? Int ?? 0)"]).stdout
        #expect(shown.contains("breakpoint \(secondID): request held") && shown.contains(", edited"), "\(shown)")
        let events = try appliance.breakpointEvents()
        #expect(events.map { $0["outcome"] as? String } == ["continued", "edited", "edited"])
        #expect(events.allSatisfy { $0["resumed_at"] is String })
    }

    @Test func abortTimeoutAndTheFirstResolutionWins() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.breakpointSettings(request: ["*/echo-body/held*"]))
        try appliance.start()
        let url = "http://127.0.0.1:\(origin.port)/echo-body/held"
        let events = try Command.start(
            Command.binary("busymate"), ["tail", "--events", "--group", appliance.group.path], in: appliance.base)
        try waitUntil("tail has bound its socket", timeout: 3) {
            (try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path)).contains {
                $0.hasPrefix("cli-")
            }
        }

        // Abort: the client gets an error from the proxy; the origin never sees it.
        let aborted = try appliance.startCurl([url])
        let abortID = try appliance.held(1)[0]["id"] as? Int ?? 0
        #expect(try appliance.cli(["breakpoints", "abort", "\(abortID)"]).status == 0)
        // Announced both ways: the tunnel's pause, the CLI's resolution.
        try waitUntil("tail shows both notifications", timeout: 3) {
            let lines = events.stdout.split(separator: "\n")
            return lines.contains { $0.contains("breakpointPaused from tunnel-") && $0.hasSuffix(" \(abortID)") }
                && lines.contains { $0.contains("breakpointContinue from cli-") && $0.hasSuffix(" \(abortID)") }
        }
        kill(events.process.processIdentifier, SIGTERM)
        let abortedDone = try aborted.finish()
        #expect(
            abortedDone.stdout.hasPrefix("Busymate: the request was aborted at breakpoint \(abortID)")
                && abortedDone.stdout.hasSuffix("\n502"))
        let again = try appliance.cli(["breakpoints", "continue", "\(abortID)"])
        #expect(again.status != 0 && again.stderr.contains("no longer held: aborted"), "\(again.stderr)")

        // Two at once: exactly one wins; the other is told.
        let raced = try appliance.startCurl([url])
        let racedID = try appliance.held(1)[0]["id"] as? Int ?? 0
        let results = try appliance.continueAndAbortAtOnce(racedID)
        #expect(results.filter { $0.status == 0 }.count == 1, "\(results)")
        let loser = results.first { $0.status != 0 }
        #expect(loser?.stderr.contains("breakpoint \(racedID)") == true, "\(String(describing: loser))")
        let racedDone = try raced.finish()
        #expect(results[0].status == 0 ? racedDone.stdout.hasSuffix("\n200") : racedDone.stdout.hasSuffix("\n502"))

        // A shorter timeout, applied live: the original goes on and the event says why.
        try appliance.writeSettings(Self.breakpointSettings(request: ["*/echo-body/held*"], timeout: 1))
        try appliance.waitUntilTunnelApplied()
        let started = Date()
        let timed = try appliance.startCurl(["-d", "original", url])
        _ = try appliance.held(1)
        let timedDone = try timed.finish()
        #expect(timedDone.stdout == "origin POST /echo-body/held\noriginal\n200")
        #expect(Date().timeIntervalSince(started) >= 1)
        #expect(try appliance.breakpointEvents().last?["outcome"] as? String == "timeout")
        #expect(try appliance.held(0).isEmpty)
        let rows = try appliance.rows("three exchanges are stored") { $0.count >= 3 }
        #expect(
            rows.contains { ($0["error"] as? String)?.contains("aborted at breakpoint \(abortID)") == true && $0["status"] as? Int == 502 })
    }

    @Test func heldResponsesGoOnEditedOrAreCutInsideAnInterceptedTunnel() async throws {
        let tlsOrigin = try await Origin.tls()
        defer { Task { await tlsOrigin.stop() } }
        let appliance = try Appliance(settings: nil)
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(Self.breakpointSettings(response: ["localhost/echo-body/*"], trust: trust))
        try appliance.start()
        let url = "https://localhost:\(tlsOrigin.port)/echo-body"

        // Edited: the status, a header and the body, re-framed (as HTTP/1.1 shows them: a reason phrase).
        let edited = try appliance.startCurl(["-i", "--http1.1", "--cacert", appliance.caFile.path, "\(url)/one"])
        let held = try appliance.held(1)
        #expect(held[0]["kind"] as? String == "response")
        let id = held[0]["id"] as? Int ?? 0
        let raw = try appliance.cli(["breakpoints", "show", "\(id)"]).stdout
        #expect(raw.hasPrefix("HTTP/1.1 200 OK\r\n") && raw.hasSuffix("\r\n\r\norigin GET /echo-body/one\n"), "\(raw)")
        let edit = appliance.base.appendingPathComponent("response.http")
        try Data("HTTP/1.1 503 Busy Editing\r\nContent-Type: text/plain\r\nX-Edited: 1\r\n\r\nreplaced".utf8).write(to: edit)
        #expect(try appliance.cli(["breakpoints", "continue", "\(id)", "--raw-file", edit.path]).status == 0)
        let editedDone = try edited.finish()
        #expect(
            editedDone.stdout.contains("HTTP/1.1 503 Busy Editing\r\n") && editedDone.stdout.contains("Content-Length: 8\r\n"),
            "\(editedDone.stdout)")
        #expect(editedDone.stdout.contains("X-Edited: 1\r\n") && editedDone.stdout.hasSuffix("\r\n\r\nreplaced\n503"))

        // Aborted: the client's connection is cut (curl: empty or partial reply).
        let cut = try appliance.startCurl(["--cacert", appliance.caFile.path, "\(url)/two"])
        let cutID = try appliance.held(1)[0]["id"] as? Int ?? 0
        #expect(try appliance.cli(["breakpoints", "abort", "\(cutID)"]).status == 0)
        let cutDone = try cut.finish()
        #expect(cutDone.status != 0 && !cutDone.stdout.contains("origin GET"), "\(cutDone)")

        // Two at once: one wins, and the client sees that one's outcome.
        let raced = try appliance.startCurl(["--cacert", appliance.caFile.path, "\(url)/three"])
        let racedID = try appliance.held(1)[0]["id"] as? Int ?? 0
        let results = try appliance.continueAndAbortAtOnce(racedID)
        #expect(results.filter { $0.status == 0 }.count == 1, "\(results)")
        let racedDone = try raced.finish()
        #expect(results[0].status == 0 ? racedDone.stdout == "origin GET /echo-body/three\n\n200" : racedDone.status != 0, "\(racedDone)")

        // The timeout, lowered live: the response as it came goes on.
        try appliance.writeSettings(Self.breakpointSettings(response: ["localhost/echo-body/*"], timeout: 1, trust: trust))
        try appliance.waitUntilTunnelApplied()
        let timed = try appliance.startCurl(["--cacert", appliance.caFile.path, "\(url)/four"])
        _ = try appliance.held(1)
        let timedDone = try timed.finish()
        #expect(timedDone.stdout == "origin GET /echo-body/four\n\n200", "\(timedDone)")
        #expect(
            try appliance.breakpointEvents().map { $0["outcome"] as? String } == [
                "edited", "aborted", results[0].status == 0 ? "continued" : "aborted", "timeout",
            ])

        let rows = try appliance.rows("four exchanges are stored") { $0.count >= 4 }
        #expect(rows.contains { ($0["url"] as? String)?.hasSuffix("/one") == true && $0["status"] as? Int == 503 })
        #expect(
            rows.contains {
                ($0["error"] as? String)?.contains("response was aborted at breakpoint \(cutID)") == true && $0["status"] as? Int == 200
            })
    }

    /// Two requests pipelined on one keep-alive connection: whichever of the
    /// first's messages is held, the second's answer never overtakes it.
    @Test func aKeptAliveConnectionKeepsItsOrderBehindAHeldMessage() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: Self.breakpointSettings(request: ["*/echo-body/held-request"], response: ["*/echo-body/held-response"]))
        try appliance.start()
        let port = try appliance.proxyPort
        for held in ["held-request", "held-response"] {
            let host = "127.0.0.1:\(origin.port)"
            let requests = [
                "GET http://\(host)/echo-body/\(held) HTTP/1.1\\r\\nHost: \(host)\\r\\n\\r\\n",
                "GET http://\(host)/echo-body/second HTTP/1.1\\r\\nHost: \(host)\\r\\nConnection: close\\r\\n\\r\\n",
            ]
            // Both written at once, before any answer: pipelined.
            let client = try Command.start(
                "/bin/bash", ["-c", "exec 3<>/dev/tcp/127.0.0.1/\(port); printf '\(requests.joined())' >&3; timeout 15 cat <&3"],
                in: appliance.base)
            let id = try appliance.held(1)[0]["id"] as? Int ?? 0
            usleep(500_000)
            #expect(client.stdout.isEmpty, "\(held): an answer overtook the held message: \(client.stdout)")
            #expect(try appliance.cli(["breakpoints", "continue", "\(id)"]).status == 0)
            let out = try client.finish().stdout
            let first = out.range(of: "origin GET /echo-body/\(held)\n")
            let second = out.range(of: "origin GET /echo-body/second\n")
            #expect(
                first != nil && second != nil && first?.lowerBound ?? out.endIndex < second?.lowerBound ?? out.startIndex, "\(held): \(out)"
            )
            #expect(out.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "\(held): \(out)")
        }
    }
}

extension ApplianceTests {
    /// A crashed tunnel: its client is cut off, the message is not left
    /// "held" forever, and the next tunnel holds new ones.
    @Test func aMessageHeldByACrashedTunnelIsMarkedAbandoned() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.breakpointSettings(request: ["*/echo-body/held*"]))
        try appliance.start()
        let url = "http://127.0.0.1:\(origin.port)/echo-body/held"
        let client = try appliance.startCurl([url])
        let id = try appliance.held(1)[0]["id"] as? Int ?? 0
        let old = try appliance.status().int("tunnel.pid") ?? 0
        kill(Int32(old), SIGKILL)
        #expect(try client.finish().status != 0)
        try waitUntil("a new tunnel is ready", timeout: 3) {
            let s = try appliance.status()
            return s.string("tunnel.state") == "ready" && (s.int("tunnel.pid") ?? old) != old
        }
        #expect(try appliance.breakpointEvents().first { $0["id"] as? Int == id }?["outcome"] as? String == "abandoned")
        let late = try appliance.cli(["breakpoints", "continue", "\(id)"])
        #expect(late.status != 0 && late.stderr.contains("no longer held: abandoned"), "\(late.stderr)")
        // The new tunnel holds, and lets go, as the old one did.
        let next = try appliance.startCurl([url])
        let nextID = try appliance.held(1)[0]["id"] as? Int ?? 0
        #expect(nextID > id)
        #expect(try appliance.cli(["breakpoints", "continue", "\(nextID)"]).status == 0)
        #expect(try next.finish().stdout.hasSuffix("\n200"))
    }
}

extension ApplianceTests {
    /// An edit that reaches the store without the CLI's check (another tool,
    /// a hand-written UPDATE): the tunnel refuses it too, the message stays
    /// held and open to a new request, and the timeout still applies.
    @Test func theTunnelRefusesAMalformedEditThatBypassedTheCLI() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.breakpointSettings(request: ["*/echo-body/held*"], timeout: 3))
        try appliance.start()
        let client = try appliance.startCurl(["-d", "kept", "http://127.0.0.1:\(origin.port)/echo-body/held"])
        let id = try appliance.held(1)[0]["id"] as? Int ?? 0
        let store = appliance.group.appendingPathComponent("capture.sqlite").path
        let update = try Command.run(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1], timeout=5)
                db.execute("UPDATE breakpoint_events SET requested = 'edit', raw_http_requested = ?, requested_at = '2026-01-01 00:00:00.000' WHERE id = ?", (b"not http at all", int(sys.argv[2])))
                db.commit()
                """, store, "\(id)",
            ])
        #expect(update.status == 0, "\(update.stderr)")
        try waitUntil("the tunnel withdrew the edit", timeout: 2) { appliance.log.contains("refused an edited message; it stays held") }
        let held = try appliance.held(1)
        #expect(held[0]["id"] as? Int == id && held[0]["requested"] is NSNull)
        #expect(client.isRunning)
        // Then the timeout: the original goes on.
        #expect(try client.finish().stdout == "origin POST /echo-body/held\nkept\n200")
        #expect(try appliance.breakpointEvents().last?["outcome"] as? String == "timeout")
    }
}

extension ApplianceTests {
    /// Issue 22: a held POST whose client has gone is dropped, never sent
    /// upstream (not by the timeout, not by a late continue), and recorded
    /// as `client_closed`; each held message says when it expires.
    @Test func aHeldRequestWhoseClientLeftIsNeverSent() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: Self.breakpointSettings(request: ["*/echo-body/held*"], timeout: 1))
        try appliance.start()
        let client = try appliance.startCurl(["-d", "side effect", "http://127.0.0.1:\(origin.port)/echo-body/held"])
        let held = try appliance.held(1)[0]
        // The deadline, for the page's countdown: paused_at + timeout_seconds.
        let paused = (held["paused_at"] as? String).flatMap(Self.date)
        let expires = (held["expires_at"] as? String).flatMap(Self.date)
        #expect(
            paused != nil && expires != nil && abs((expires ?? .distantPast).timeIntervalSince(paused ?? .distantFuture) - 1) < 0.01,
            "\(held)")

        kill(client.process.processIdentifier, SIGKILL)
        _ = try? client.finish()
        try waitUntil("the event says client_closed", timeout: 3) {
            try appliance.breakpointEvents().last?["outcome"] as? String == "client_closed"
        }
        // Well past the timeout: nothing reached the origin.
        try await Task.sleep(for: .seconds(2))
        #expect(!origin.received.all.contains { $0.hasPrefix("POST ") }, "\(origin.received.all)")
        #expect(try appliance.breakpointEvents().last?["outcome"] as? String == "client_closed")
        let row = try #require(try appliance.rows("the exchange is stored") { !$0.isEmpty }.first)
        #expect((row["error"] as? String)?.contains("client closed") == true && row["status"] is NSNull, "\(row)")

        // timeout_seconds 0: held until resolved, with no deadline.
        try appliance.writeSettings(Self.breakpointSettings(request: ["*/echo-body/held*"], timeout: 0))
        try appliance.waitUntilTunnelApplied()
        let waiting = try appliance.startCurl(["http://127.0.0.1:\(origin.port)/echo-body/held-forever"])
        let forever = try appliance.held(1)[0]
        #expect(forever["expires_at"] is NSNull, "\(forever)")
        try await Task.sleep(for: .seconds(1.5))
        #expect(try waiting.isRunning && appliance.held(1).count == 1)
        #expect(try appliance.cli(["breakpoints", "continue", "\(forever["id"] as? Int ?? 0)"]).status == 0)
        #expect(try waiting.finish().stdout.hasSuffix("\n200"))
    }

    private static func date(_ text: String) -> Date? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: text)
    }
}

extension Appliance {
    /// Waits until the tunnel runs on settings.json as it is now.
    func waitUntilTunnelApplied(timeout: Double = 3) throws {
        let sha = SHA256.hash(data: try Data(contentsOf: settingsURL)).map { String(format: "%02x", $0) }.joined()
        try waitUntil("the tunnel applied \(sha.prefix(12))", timeout: timeout) { try status().string("tunnel.settings_sha256") == sha }
    }

    /// curl through the proxy, left running: `-w` appends the status code.
    func startCurl(_ arguments: [String]) throws -> Running {
        try Command.start(
            "/usr/bin/curl", ["-sS", "--max-time", "20", "-x", "http://127.0.0.1:\(try proxyPort)", "-w", "\n%{http_code}"] + arguments,
            in: base)
    }

    /// Waits until exactly `count` messages are held; returns them.
    @discardableResult
    func held(_ count: Int, timeout: Double = 5) throws -> [[String: Any]] {
        var found: [[String: Any]] = []
        try waitUntil("\(count) held", timeout: timeout) {
            let r = try cli(["breakpoints", "list", "--json"])
            found = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
            return found.count == count
        }
        return found
    }

    /// `breakpoints continue` and `breakpoints abort` on one message at
    /// once; their results, in that order.
    func continueAndAbortAtOnce(_ id: Int) throws -> [CommandResult] {
        let busymate = Command.binary("busymate")
        let racers = try ["continue", "abort"].map {
            try Command.start(busymate, ["breakpoints", $0, "\(id)", "--group", group.path], in: base)
        }
        return try racers.map { try $0.finish() }
    }

    /// `breakpoints list --all --json`: oldest first.
    func breakpointEvents() throws -> [[String: Any]] {
        let r = try cli(["breakpoints", "list", "--all", "--json"])
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
    }
}
