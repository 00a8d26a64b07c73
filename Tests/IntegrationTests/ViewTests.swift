import Foundation
import Testing

extension ApplianceTests {
    /// `show` and `list` never change what was on the wire: JSON keeps its
    /// key order and its numbers as written, binary bodies are a hex dump,
    /// `show --json` has headers as pairs and bodies whole; `list` is a
    /// table that fits a terminal and colours only for one.
    @Test func theViewsShowWhatWasOnTheWire() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        let json = #"{"zebra":1.0,"apple":1.23e-7,"list":[true,null,"x"],"nested":{"b":2,"a":10000000000000000000001}}"#
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/json", extra: ["-H", "Content-Type: application/json", "--data-binary", json]
            ).code == 200)
        let binary = appliance.base.appendingPathComponent("binary.bin")
        let bytes = Data([0x00, 0xFF, 0x10, 0x41, 0xC3, 0x28, 0x7F, 0x0A] + Array(repeating: 0x42, count: 12))
        try bytes.write(to: binary)
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/bin",
                extra: [
                    "-H", "Content-Type: application/octet-stream",
                    "--data-binary", "@\(binary.path)",
                ]
            ).code == 200)
        let rows = try appliance.rows("both exchanges are stored") { $0.count == 2 }
        let jsonRow = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/json") == true })
        let binRow = try #require(rows.first { ($0["url"] as? String)?.hasSuffix("/bin") == true })
        let jsonID = "\(jsonRow["id"] as? Int ?? 0)", binID = "\(binRow["id"] as? Int ?? 0)"

        // The JSON body, pretty-printed from its own bytes.
        let pretty = try appliance.cli(["show", jsonID, "--body", "request"])
        #expect(pretty.status == 0, "\(pretty.stderr)")
        #expect(
            pretty.stdout == """
                {
                  "zebra": 1.0,
                  "apple": 1.23e-7,
                  "list": [true, null, "x"],
                  "nested": {
                    "b": 2,
                    "a": 10000000000000000000001
                  }
                }

                """, "\(pretty.stdout)")
        // Headers only.
        let head = try appliance.cli(["show", jsonID, "--headers"]).stdout
        #expect(head.contains("> Content-Type: application/json") && head.contains("< 200 OK") && !head.contains("zebra"), "\(head)")

        // A binary body: a hex dump, never replacement characters.
        let dump = try appliance.cli(["show", binID, "--body", "request"]).stdout
        #expect(dump.contains("00000000  00 ff 10 41 c3 28 7f 0a  42 42 42 42 42 42 42 42  |...A.(..BBBBBBBB|"), "\(dump)")
        #expect(!dump.contains("\u{FFFD}"))

        // Several exchanges, one named by the start of its request id: a JSON array.
        let requestID = try #require(binRow["request_id"] as? String)
        let both = try appliance.cli(["show", "--json", jsonID, String(requestID.dropLast(6))])
        let array = try JSONSerialization.jsonObject(with: Data(both.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(array.map { $0["id"] as? Int } == [jsonRow["id"] as? Int, binRow["id"] as? Int], "\(both.stderr)")
        // show --json: a list row's fields, headers as pairs, the body whole.
        let shown = try #require(array.first)
        for key in ["id", "request_id", "started_at", "method", "url", "status", "tls", "request_size", "response_content_type"] {
            #expect(shown[key] as? NSObject == jsonRow[key] as? NSObject, "\(key)")
        }
        #expect((shown["started_at"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
        #expect(shown.headerLines("request").contains("Content-Type: application/json"))
        #expect(shown.at("request", "body", "text") as? String == json)
        #expect(shown.at("request", "body", "truncated") as? Bool == false)
        #expect(array.last?.at("request", "body", "base64") as? String == bytes.base64EncodedString())
        #expect(try appliance.cli(["show", "ffffffff"]).stderr.contains("no exchange has a request id starting ffffffff"))

        // list: a header row, then one line per exchange with its columns.
        let table = try appliance.cli(["list"]).stdout.split(separator: "\n").map(String.init)
        #expect(
            table.first?.split(separator: " ", omittingEmptySubsequences: true) == [
                "ID", "TIME", "METHOD", "CODE", "SIZE", "TYPE", "DUR", "URL",
            ])
        let jsonLine = try #require(table.first { $0.hasSuffix("/echo-body/json") })
        #expect(jsonLine.contains(" POST ") && jsonLine.contains(" 200 ") && jsonLine.contains(" text "), "\(jsonLine)")
        // Piped: whole lines, no colour. On a terminal of 80 columns: fitted, coloured unless NO_COLOR.
        #expect(!table.joined().contains("\u{1B}["))
        let longURL = "\(base)/echo-body/" + String(repeating: "long-path-segment/", count: 8)
        #expect(try Command.curl(proxyPort: port, longURL).code == 200)
        _ = try appliance.rows("the long one is stored") { $0.count == 3 }
        func onTerminal(_ environment: String) throws -> [String] {
            let command =
                "stty cols 80; env -u NO_COLOR TERM=xterm \(environment) \(Command.binary("busymate")) list --group \(appliance.group.path)"
            return try Command.run("/usr/bin/script", ["-qec", command, "/dev/null"]).stdout
                .replacingOccurrences(of: "\r", with: "").split(separator: "\n").map(String.init)
        }
        let coloured = try onTerminal("")
        #expect(coloured.contains { $0.contains("\u{1B}[32m200") }, "\(coloured)")
        let plain = try onTerminal("NO_COLOR=1")
        #expect(!plain.joined().contains("\u{1B}["))
        #expect(plain.count == 4 && plain.allSatisfy { $0.count <= 80 }, "\(plain)")
        #expect(plain.contains { $0.contains(" http://127.0.0.1:") && $0.contains("…") && $0.hasSuffix("segment/") }, "\(plain)")

        // Shell completion offers the stored exchanges' ids (newest first), as the shell asks for them.
        let script = try Command.run(Command.binary("busymate"), ["--generate-completion-script", "bash"]).stdout
        #expect(script.contains("---completion show -- positional@0"))
        let offered = try Command.run(
            Command.binary("busymate"),
            [
                "---completion", "show", "--", "positional@0", "4", "0",
                "busymate", "show", "--group", appliance.group.path, "",
            ])
        #expect(offered.stdout.split(separator: "\n") == ["3", "2", "1"], "\(offered)")

        // What came off the wire cannot drive the terminal: a body with an escape sequence is a hex dump.
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/esc",
                extra: [
                    "-H", "Content-Type: text/plain",
                    "--data-binary", "title \u{1B}]0;pwned\u{07}",
                ]
            ).code == 200)
        let escaped = try #require(try appliance.rows("the escape is stored") { $0.count == 4 }.first)
        let shownEscape = try appliance.cli(["show", "\(escaped["id"] as? Int ?? 0)"]).stdout
        #expect(!shownEscape.contains("\u{1B}") && shownEscape.contains("1b 5d 30 3b"), "\(shownEscape)")
    }
}
