import Foundation
import Testing

/// Issue 22: what Busymate answers itself (a block rule, map_local, its own
/// errors) is recorded as sent: status, headers and body, as `show` shows them.
extension ApplianceTests {
    @Test func localAnswersAreRecordedAsSent() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(
            settings: Appliance.interceptionSettings(
                include: [],
                extra: """
                    , "rules": [{"name": "legal", "match": "127.0.0.1:\(origin.port)/banned*", "action": "block", "status": 451},
                                {"name": "mock", "match": "127.0.0.1:\(origin.port)/mock*", "action": "map_local", "file": "/nonexistent/mock.json"}]
                    """))
        try appliance.start()
        // Nothing listens on a port just closed: the tunnel answers 502 itself.
        let closed = try await Origin.plain()
        let deadPort = closed.port
        await closed.stop()

        let answers = [
            ("/banned", "http://127.0.0.1:\(origin.port)/banned"), ("/mock", "http://127.0.0.1:\(origin.port)/mock"),
            ("/dead", "http://127.0.0.1:\(deadPort)/dead"),
        ]
        var got: [String: (code: Int, body: String)] = [:]
        for (name, url) in answers {
            let r = try appliance.curl(url)
            got[name] = (r.code, r.body)
        }
        #expect(got["/banned"]?.code == 451 && got["/mock"]?.code == 404 && got["/dead"]?.code == 502, "\(got)")
        let rows = try appliance.rows("three exchanges are stored") { $0.count >= 3 }
        for (name, _) in answers {
            let id = rows.first { ($0["url"] as? String)?.hasSuffix(name) == true }?["id"]
            let row = try appliance.row(id)
            let response = row["response"] as? [String: Any] ?? [:]
            let headers = (response["headers"] as? [[String]] ?? []).map { $0.joined(separator: ": ") }
            let body = response["body"] as? [String: Any]
            let sent = got[name]?.body ?? "?"
            #expect(response["status"] as? Int == got[name]?.code, "\(name): \(response)")
            #expect(
                headers.contains("Content-Type: text/plain; charset=utf-8") && headers.contains("Content-Length: \(sent.utf8.count)"),
                "\(name): \(headers)")
            #expect(
                sent.hasPrefix("Busymate: ") && body?["text"] as? String == sent && body?["size"] as? Int == sent.utf8.count,
                "\(name): \(String(describing: body))")
            #expect(row["response_size"] as? Int == sent.utf8.count)
        }
        // `busymate show` prints them too.
        let bannedID = rows.first { ($0["url"] as? String)?.hasSuffix("/banned") == true }?["id"] as? Int ?? 0
        let shown = try appliance.cli(["show", "\(bannedID)"]).stdout
        #expect(
            shown.contains("< 451") && shown.contains("< Content-Type: text/plain") && shown.contains("blocked by the rule \"legal\""),
            "\(shown)")

        // A request the decoder refuses: its 400 is recorded too.
        let reply = try HostileClientTests.raw(
            try appliance.proxyPort, "GET http://127.0.0.1:\(origin.port)/x HTTP/1.1\r\nHost: a\r\nBad Header: 1\r\n\r\n")
        #expect(reply.status == 400)
        let refused = try appliance.rows("the refusal is stored") { $0.contains { $0["status"] as? Int == 400 } }.first {
            $0["status"] as? Int == 400
        }
        let refusedRow = try appliance.row(refused?["id"])
        let refusedBody = (refusedRow["response"] as? [String: Any])?["body"] as? [String: Any]
        #expect(
            (refusedBody?["text"] as? String)?.hasPrefix("Busymate: a header name or value has a byte HTTP does not allow") == true,
            "\(refusedRow)")
    }
}
