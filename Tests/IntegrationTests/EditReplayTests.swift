import Foundation
import Testing

extension ApplianceTests {
    /// `busymate curl` prints a command that repeats the request byte for
    /// byte, binary bodies included; `resend` sends it again with each kind
    /// of change, linked to the original; `compose` sends a new one. All of
    /// them through the tunnel, so all of them are captured.
    @Test func requestsAreReplayedExactlyOrWithChanges() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        let payload = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) } + [0, 0, 0x27, 0x0A])
        let upload = appliance.base.appendingPathComponent("payload.bin")
        try payload.write(to: upload)
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/bin",
                extra: [
                    "--data-binary", "@\(upload.path)",
                    "-H", "Content-Type: application/octet-stream",
                ]
            ).code == 200)
        let original = try #require(try appliance.rows("the upload is stored") { $0.count == 1 }.first)
        let originalID = try #require(original["id"] as? Int)

        // The printed command, run by a shell, through Busymate again: the new row's body is the same bytes.
        let printed = try appliance.cli(["curl", "\(originalID)", "--proxy", "--body-dir", appliance.base.path])
        #expect(printed.status == 0, "\(printed.stderr)")
        #expect(printed.stdout.contains("--data-binary '@\(appliance.base.path)/busymate-\(originalID).request.bin'"), "\(printed.stdout)")
        // Written 0600 (bodies hold credentials), and never over a file already there.
        let written = try FileManager.default.attributesOfItem(atPath: "\(appliance.base.path)/busymate-\(originalID).request.bin")
        #expect((written[.posixPermissions] as? Int) == 0o600)
        let again = try appliance.cli(["curl", "\(originalID)", "--body-dir", appliance.base.path])
        #expect(again.status != 0 && again.stderr.contains("File exists"), "\(again.stderr)")
        let ran = try Command.run(
            "/bin/sh", ["-c", printed.stdout.trimmingCharacters(in: .newlines) + " -sS -o /dev/null -w '%{http_code}'"])
        #expect(ran.stdout == "200", "\(ran.stderr)")
        let replayed = try #require(try appliance.rows("the replay is stored") { $0.count == 2 }.first)
        #expect(try appliance.row(replayed["id"]).at("request", "body", "base64") as? String == payload.base64EncodedString())

        // resend with changes: each lands in a new row that links to the original.
        func resend(_ arguments: [String], environment: [String: String]? = nil) throws -> [String: Any] {
            let before = try appliance.rows().count
            let r =
                environment == nil
                ? try appliance.cli(["resend", "\(originalID)"] + arguments)
                : try Command.run(
                    Command.binary("busymate"), ["resend", "\(originalID)"] + arguments + ["--group", appliance.group.path],
                    environment: environment)
            #expect(r.status == 0 && r.stdout.contains("resent exchange \(originalID) as"), "\(arguments): \(r.stdout) \(r.stderr)")
            let newest = try #require(try appliance.rows("the resent row is stored") { $0.count == before + 1 }.first)
            #expect(newest["resent_from"] as? Int == originalID)
            return try appliance.row(newest["id"])
        }
        let put = try resend(["--method", "put"])
        #expect(put["method"] as? String == "PUT" && put.at("request", "body", "base64") as? String == payload.base64EncodedString())
        let moved = try resend(["--url", "\(base)/echo-body/moved?x=1"])
        #expect(moved["url"] as? String == "\(base)/echo-body/moved?x=1")
        let headed = try resend(["--header", "X-Added: yes", "--header", "Content-Type: text/plain", "--header", "User-Agent:"])
        let lines = headed.headerLines("request")
        #expect(
            lines.contains("X-Added: yes") && lines.contains("Content-Type: text/plain") && !lines.contains { $0.hasPrefix("User-Agent") },
            "\(lines)")
        let text = appliance.base.appendingPathComponent("text.txt")
        try Data("replaced body".utf8).write(to: text)
        let rebodied = try resend(["--body-file", text.path])
        #expect(rebodied.at("request", "body", "text") as? String == "replaced body")
        #expect(rebodied.at("request", "body", "size") as? Int == 13)
        // --edit: the whole request in $EDITOR (here a sed script), re-framed.
        var environment = ProcessInfo.processInfo.environment
        environment["VISUAL"] = ""
        environment["EDITOR"] = "sed -i -e 's|^POST |PATCH |' -e 's|/echo-body/bin |/echo-body/edited |'"
        let edited = try resend(["--body-file", text.path, "--edit"], environment: environment)
        #expect(edited["method"] as? String == "PATCH" && (edited["url"] as? String)?.hasSuffix("/echo-body/edited") == true, "\(edited)")
        #expect(edited.at("response", "body", "text") as? String == "origin PATCH /echo-body/edited\nreplaced body")
        // A change that cannot be sent is refused, naming the flag, and nothing is sent.
        let count = try appliance.rows().count
        let bad = try appliance.cli(["resend", "\(originalID)", "--url", "ftp://example.com/"])
        #expect(bad.status != 0 && bad.stderr.contains("--url ftp://example.com/"), "\(bad.stderr)")
        #expect(try appliance.rows().count == count)

        // compose: a new request, captured, linked to nothing.
        let composed = try appliance.cli([
            "compose", "--url", "\(base)/echo-body/new", "--method", "POST", "--header", "X-New: 1", "--body-file", text.path,
        ])
        #expect(
            composed.status == 0 && composed.stdout.contains("sent POST \(base)/echo-body/new: 200 OK"),
            "\(composed.stdout) \(composed.stderr)")
        let newRow = try #require(try appliance.rows("the composed one is stored") { $0.count == count + 1 }.first)
        #expect(newRow["resent_from"] is NSNull && newRow["url"] as? String == "\(base)/echo-body/new")
        #expect(try appliance.row(newRow["id"]).headerLines("request").contains("X-New: 1"))

        // compose --from-curl: the command `busymate curl` prints for a row, imported, is the same request again,
        // as curl itself running that command through the proxy sends it.
        let rebodiedID = try #require(rebodied["id"] as? Int)
        let command = try appliance.cli(["curl", "\(rebodiedID)"]).stdout.trimmingCharacters(in: .newlines)
        let imported = try appliance.cli(["compose", "--from-curl", command])
        #expect(
            imported.status == 0 && imported.stdout.contains("sent POST \(base)/echo-body/bin: 200 OK"),
            "\(command) → \(imported.stdout) \(imported.stderr)")
        let importedRow = try appliance.row(try #require(try appliance.rows("the import is stored") { $0.count == count + 2 }.first)["id"])
        let ranByCurl = try Command.run("/bin/sh", ["-c", command + " -sS -o /dev/null -x http://127.0.0.1:\(port)"])
        #expect(ranByCurl.status == 0, "\(ranByCurl.stderr)")
        let curlRow = try appliance.row(try #require(try appliance.rows("curl's is stored") { $0.count == count + 3 }.first)["id"])
        // Framing and hop-by-hop headers are each client's own.
        let framing = { (lines: [String]) in
            Set(
                lines.filter { line in
                    !["host:", "content-length:", "connection:", "proxy-connection:"].contains { line.lowercased().hasPrefix($0) }
                })
        }
        for row in [importedRow, curlRow] {
            #expect(row["method"] as? String == "POST" && row["url"] as? String == "\(base)/echo-body/bin")
            #expect(row.at("request", "body", "text") as? String == "replaced body")
        }
        #expect(
            framing(importedRow.headerLines("request")) == framing(curlRow.headerLines("request")),
            "imported \(importedRow.headerLines("request")) vs curl's \(curlRow.headerLines("request"))")
        // An option the import cannot take is refused by name, and nothing is sent.
        let unknown = try appliance.cli(["compose", "--from-curl", "curl --form a=1 \(base)/echo-body/form"])
        #expect(unknown.status != 0 && unknown.stderr.contains("curl option --form is not one the import takes"), "\(unknown.stderr)")
        #expect(try appliance.rows().count == count + 3)
    }
}
