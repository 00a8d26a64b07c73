import Foundation
import Testing

/// Issue 22: raw UTF-8 in a request target (what `curl --path-as-is` sends
/// for a typed `café`) is forwarded percent-encoded, as mitmproxy and the
/// origin itself take it, not refused with `400`; the row notes it.
extension ApplianceTests {
    @Test func rawUTF8InARequestTargetIsForwardedPercentEncoded() async throws {
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

        // Plain HTTP, absolute form: the bytes c3 a9 as they are.
        let plain = try HostileClientTests.raw(
            port, "GET http://127.0.0.1:\(origin.port)/caf\u{e9}?q=\u{fc} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(plain.status == 200, "\(plain.text)")
        #expect(plain.text.contains("origin GET /caf%C3%A9?q=%C3%BC\n"), "\(plain.text)")
        #expect(origin.received.all.contains("GET /caf%C3%A9?q=%C3%BC"), "\(origin.received.all)")

        // Inside an intercepted tunnel, origin form.
        let file = appliance.base.appendingPathComponent("raw-request")
        try Data("GET /na\u{ef}ve HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8).write(to: file)
        let script = Command.repoRoot.appendingPathComponent("tests/clients/rawtls.py").path
        let r = try Command.run(
            "/usr/bin/python3", [script, "\(port)", "localhost:\(tlsOrigin.port)", appliance.caFile.path, "@" + file.path])
        let tls = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] ?? [:]
        #expect(tls["status"] as? Int == 200, "\(r.stdout) \(r.stderr)")
        #expect((tls["text"] as? String)?.contains("origin GET /na%C3%AFve\n") == true, "\(r.stdout)")

        // Each row notes what was changed.
        let rows = try appliance.rows("both exchanges are stored") { rows in
            rows.contains { ($0["url"] as? String)?.hasSuffix("/caf%C3%A9?q=%C3%BC") == true }
                && rows.contains { ($0["url"] as? String)?.hasSuffix("/na%C3%AFve") == true }
        }
        for suffix in ["/caf%C3%A9?q=%C3%BC", "/na%C3%AFve"] {
            let row = rows.first { ($0["url"] as? String)?.hasSuffix(suffix) == true }
            #expect(row?["status"] as? Int == 200)
            #expect(
                row?["error"] is NSNull
                    && (row?["note"] as? String)?.contains("raw bytes outside ASCII in the request target were percent-encoded") == true,
                "\(String(describing: row))")
        }
        // A target already encoded is left alone, and not noted.
        let clean = try HostileClientTests.raw(
            port, "GET http://127.0.0.1:\(origin.port)/caf%C3%A9 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        #expect(clean.status == 200)
        let cleanURL = "http://127.0.0.1:\(origin.port)/caf%C3%A9"
        let cleanRow = try appliance.rows("the clean exchange is stored") { $0.contains { $0["url"] as? String == cleanURL } }.first {
            $0["url"] as? String == cleanURL
        }
        #expect(cleanRow?["status"] as? Int == 200 && cleanRow?["error"] is NSNull, "\(cleanRow ?? [:])")
    }

    @Test func aRawTargetSplitAcrossReadsIsForwardedToo() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.start()
        let port = try appliance.proxyPort
        let line = "GET http://127.0.0.1:\(origin.port)/caf\u{e9}/x HTTP/1.1\r\n"
        let request = line + "Host: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let bytes = Array(request.utf8)
        // Cut inside the method, inside the two bytes of é, and before the version.
        let e = try #require(bytes.firstIndex(of: 0xC3))
        let split = try HostileClientTests.raw(port, request, splits: [2, e + 1, bytes.count - 40])
        #expect(split.status == 200 && split.text.contains("origin GET /caf%C3%A9/x\n"), "\(split.text)")
        // A request line longer than a first read (NIO starts at 2 KiB), its raw byte past it.
        let long =
            "GET http://127.0.0.1:\(origin.port)/" + String(repeating: "a", count: 6000)
            + "/na\u{ef}ve HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let reply = try HostileClientTests.raw(port, long, splits: [1000, 3000, 5000])
        #expect(reply.status == 200 && reply.text.contains("/na%C3%AFve\n"), "\(reply.text.prefix(300))")
        // An ASCII request line cut anywhere goes on as before; a partial line left unfinished times out as before.
        let plain = try HostileClientTests.raw(
            port, "GET http://127.0.0.1:\(origin.port)/plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            splits: [5, 20, 30])
        #expect(plain.status == 200, "\(plain.text)")
        let rows = try appliance.rows("the exchanges are stored") { rows in rows.filter { $0["status"] as? Int == 200 }.count >= 3 }
        #expect(
            rows.contains {
                ($0["note"] as? String)?.contains("percent-encoded") == true && ($0["url"] as? String)?.hasSuffix("/caf%C3%A9/x") == true
            })
    }
}
