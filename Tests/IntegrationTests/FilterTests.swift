import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension ApplianceTests {
    /// `list`, `tail` and `export` take a filter in mitmproxy's language,
    /// over real captured traffic; a bad one exits 64 with the position.
    @Test func listTailAndExportTakeAFilter() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        // A word only past the row's first 16 KiB: it is in the body file alone.
        let upload = appliance.base.appendingPathComponent("upload.txt")
        try Data((String(repeating: "a", count: 40_000) + " needle-7f3 ").utf8).write(to: upload)
        #expect(try Command.curl(proxyPort: port, "\(base)/echo-body/upload", extra: ["--data-binary", "@\(upload.path)"]).code == 200)
        #expect(try Command.curl(proxyPort: port, "\(base)/plain?q=caf%C3%A9").code == 200)
        _ = try Command.curl(proxyPort: port, "\(base)/break")
        _ = try appliance.rows("three exchanges are stored") { $0.count >= 3 }

        func urls(_ filter: [String]) throws -> [String] {
            let r = try appliance.cli(["list", "--json"] + filter)
            #expect(r.status == 0, "\(filter): \(r.stderr)")
            let rows = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []
            return rows.compactMap { ($0["url"] as? String).map { String($0.dropFirst(base.count)) } }
        }
        #expect(try urls(["~m", "POST"]) == ["/echo-body/upload"])
        // list --json: body sizes as they crossed the wire, and the content types.
        let posted =
            try JSONSerialization.jsonObject(with: Data(appliance.cli(["list", "--json", "~m POST"]).stdout.utf8)) as? [[String: Any]]
        #expect(
            posted?.first?["request_size"] as? Int == 40_012 && posted?.first?["response_size"] as? Int ?? 0 > 40_000, "\(posted ?? [])")
        #expect(
            posted?.first?["request_content_type"] as? String == "application/x-www-form-urlencoded"
                && posted?.first?["response_content_type"] as? String == "text/plain", "\(posted ?? [])")
        #expect(try urls(["~bq needle-7f3"]) == ["/echo-body/upload"])
        #expect(try urls(["~b", "needle-7f3", "&", "~m", "GET"]).isEmpty)
        #expect(try urls(["~e"]) == ["/break"])
        #expect(try urls(["!~e & ~c 2xx"]) == ["/plain?q=caf%C3%A9", "/echo-body/upload"])
        #expect(try urls(["café"]) == ["/plain?q=caf%C3%A9"])
        // The old flags are clauses of the same filter.
        #expect(try urls(["--method", "GET", "~u", "plain|break"]) == ["/break", "/plain?q=caf%C3%A9"])

        let bad = try appliance.cli(["list", "~c 4x5"])
        #expect(bad.status == 64 && bad.stderr.contains("position 4: a status is a code"), "\(bad)")
        #expect(try appliance.cli(["list", "(~e"]).status == 64)
        // The flags read their values as the clauses do.
        let badFlag = try appliance.cli(["list", "--status", "4x5"])
        #expect(badFlag.status != 0 && badFlag.stderr.contains("--status: a status is a code"), "\(badFlag)")
        #expect(try urls(["--since", "1h", "~e"]) == ["/break"])

        let har = appliance.base.appendingPathComponent("posts.har")
        #expect(try appliance.cli(["export", "--har", har.path, "~m POST"]).status == 0)
        let log = (try JSONSerialization.jsonObject(with: Data(contentsOf: har)) as? [String: Any])?["log"] as? [String: Any]
        let entries = log?["entries"] as? [[String: Any]] ?? []
        #expect(entries.compactMap { ($0["request"] as? [String: Any])?["url"] as? String } == ["\(base)/echo-body/upload"])
        // `-` is standard output, the HAR alone on it.
        let piped = try appliance.cli(["export", "--har", "-", "~e"])
        let pipedLog = (try JSONSerialization.jsonObject(with: Data(piped.stdout.utf8)) as? [String: Any])?["log"] as? [String: Any]
        #expect(
            (pipedLog?["entries"] as? [[String: Any]])?.compactMap { ($0["request"] as? [String: Any])?["url"] as? String } == [
                "\(base)/break"
            ], "\(piped)")

        // tail: only the new exchanges the filter keeps.
        let tail = try Command.start(Command.binary("busymate"), ["tail", "~m POST", "--group", appliance.group.path], in: appliance.base)
        defer {
            kill(tail.process.processIdentifier, SIGTERM)
            tail.process.waitForExit()
        }
        // And as JSON lines: one `list --json` row per line.
        let jsonTail = try Command.start(
            Command.binary("busymate"), ["tail", "--json", "~m POST", "--group", appliance.group.path], in: appliance.base)
        defer {
            kill(jsonTail.process.processIdentifier, SIGTERM)
            jsonTail.process.waitForExit()
        }
        try waitUntil("both tails listen", timeout: 3) {
            try FileManager.default.contentsOfDirectory(atPath: appliance.group.appendingPathComponent("notify").path).filter {
                $0.hasPrefix("cli-")
            }.count == 2
        }
        #expect(try Command.curl(proxyPort: port, "\(base)/skipped-get").code == 200)
        #expect(try Command.curl(proxyPort: port, "\(base)/echo-body/tailed", extra: ["--data", "x=1"]).code == 200)
        try waitUntil("tail shows the POST", timeout: 3) { tail.stdout.contains("POST 200 \(base)/echo-body/tailed") }
        #expect(!tail.stdout.contains("skipped-get") && !tail.stdout.contains("/echo-body/upload"), "\(tail.stdout)")
        try waitUntil("the JSON tail shows the POST", timeout: 3) { jsonTail.stdout.hasSuffix("\n") }
        let line =
            try JSONSerialization.jsonObject(with: Data(jsonTail.stdout.split(separator: "\n").first.map(String.init)?.utf8 ?? "".utf8))
            as? [String: Any]
        #expect(
            line?["url"] as? String == "\(base)/echo-body/tailed" && line?["method"] as? String == "POST" && line?["id"] is Int,
            "\(jsonTail.stdout)")
        #expect(jsonTail.stdout.split(separator: "\n").count == 1, "\(jsonTail.stdout)")
        #expect(try appliance.cli(["tail", "~x"]).status == 64)

        // The group may come first, as with most tools' global options.
        let groupFirst = try Command.run(Command.binary("busymate"), ["--group", appliance.group.path, "list", "~m", "POST", "--json"])
        #expect(
            groupFirst.status == 0 && groupFirst.stdout.contains("/echo-body/tailed") && !groupFirst.stdout.contains("skipped-get"),
            "\(groupFirst)")
        let version = try Command.run(Command.binary("busymate"), ["--version"])
        #expect(version.status == 0 && version.stdout.hasPrefix("0."), "\(version)")
    }
}
