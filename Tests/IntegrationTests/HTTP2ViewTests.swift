import BusymateShared
import CaptureStore
import Foundation
import Testing

/// The CLI, as a user runs it, over a store holding an HTTP/2 gRPC call
/// (written as the tunnel writes rows): `show`, `list` and its filters,
/// `curl` and `export --har` (issue 23, "Store and reading").
@Suite struct HTTP2ViewTests {
    final class Group {
        let dir = URL(fileURLWithPath: "/tmp/bmv2-\(UInt32.random(in: 0...UInt32.max))")
        let traffic: TrafficRepository

        init() throws {
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("bodies"), withIntermediateDirectories: true)
            traffic = TrafficRepository(database: try CaptureDatabase(paths: GroupPaths(root: dir)))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }

        func cli(_ arguments: [String]) throws -> CommandResult {
            try Command.run(Command.binary("busymate"), arguments + ["--group", dir.path])
        }
    }

    /// A gRPC call on stream 5 of connection c7f3 (status in the response
    /// trailers), then a plain HTTP/1.1 request; their ids.
    static func rows(_ group: Group, url: String) throws -> (h2: Int64, h1: Int64) {
        let base = Date(timeIntervalSince1970: 1_800_000_000)
        let parts = try #require(URLComponents(string: url))
        var call = ExchangeRecord(
            startedAt: base, scheme: parts.scheme ?? "https", method: "POST", host: parts.host ?? "", port: parts.port ?? 443,
            path: parts.path, url: url, tlsMode: parts.scheme == "https" ? .mitm : .none)
        call.httpVersion = "HTTP/2.0"
        call.streamID = 5
        call.connectionID = "c7f3"
        call.status = 200
        call.reason = ""
        call.requestHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc"), ("te", "trailers")])
        call.requestBody = Data([0, 0, 0, 0, 7, 0x0A, 0x05, 0x77, 0x6F, 0x72, 0x6C, 0x64])
        call.requestBodySize = 12
        call.responseHeaders = ExchangeRecord.encodeHeaders([("content-type", "application/grpc")])
        call.responseTrailers = ExchangeRecord.encodeHeaders([("grpc-status", "0"), ("grpc-message", "OK")])
        var plain = ExchangeRecord(
            startedAt: base.addingTimeInterval(1), scheme: "http", method: "GET", host: "h1.example.com", port: 80,
            path: "/", url: "http://h1.example.com/", tlsMode: .none)
        plain.httpVersion = "HTTP/1.1"
        plain.status = 200
        plain.reason = "OK"
        plain.responseHeaders = "[]"
        let saved = try group.traffic.insert([call, plain])
        return (try #require(saved[0].id), try #require(saved[1].id))
    }

    @Test func showAndListTellAnHTTP2StreamAndItsTrailers() throws {
        let group = try Group()
        let (h2, h1) = try Self.rows(group, url: "https://grpc.example.com/helloworld.Greeter/SayHello")
        let shown = try group.cli(["show", "\(h2)"])
        #expect(shown.status == 0, "\(shown.stderr)")
        let lines = shown.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("stream 5 on connection c7f3"), "\(shown.stdout)")
        #expect(lines.contains("> POST /helloworld.Greeter/SayHello HTTP/2.0"), "\(shown.stdout)")
        // The trailers after the response body, in their order.
        let status = try #require(lines.firstIndex(of: "< trailer: grpc-status: 0"), "\(shown.stdout)")
        #expect(lines[status + 1] == "< trailer: grpc-message: OK")
        #expect(status > (lines.firstIndex(of: "< content-type: application/grpc") ?? .max))
        // --headers keeps them: they are header lines.
        #expect(try group.cli(["show", "\(h2)", "--headers"]).stdout.contains("< trailer: grpc-status: 0"))
        // An HTTP/1.1 row: no stream line, no trailers.
        let plain = try group.cli(["show", "\(h1)"]).stdout
        #expect(!plain.contains("stream") && !plain.contains("trailer") && plain.contains("> GET / HTTP/1.1"), "\(plain)")

        // JSON: the row's version, stream and connection; the detail's trailers.
        let json = try group.cli(["show", "--json", "\(h2)"])
        let detail = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stderr)")
        #expect(
            detail["http_version"] as? String == "HTTP/2.0" && detail["stream_id"] as? Int == 5
                && detail["connection_id"] as? String == "c7f3")
        #expect((detail["response"] as? [String: Any])?["trailers"] as? [[String]] == [["grpc-status", "0"], ["grpc-message", "OK"]])
        #expect((detail["request"] as? [String: Any])?["trailers"] is NSNull)

        // The filters, from the command line.
        func listed(_ filter: String) throws -> [Int] {
            let r = try group.cli(["list", filter, "--json"])
            #expect(r.status == 0, "\(filter): \(r.stderr)")
            return (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
        }
        #expect(try listed("~proto h2") == [Int(h2)])
        #expect(try listed("~proto h1") == [Int(h1)])
        #expect(try listed("~grpc & ~u Greeter") == [Int(h2)])
        #expect(try listed("!~grpc") == [Int(h1)])
        let bad = try group.cli(["list", "~d grpc ~proto h3"])
        #expect(
            bad.status == 64 && bad.stderr.contains("position 16: ~proto is h1 (HTTP/1.0 or 1.1) or h2 (HTTP/2), not \"h3\""),
            "\(bad.stderr)")
    }

    /// `curl ID` asks curl for HTTP/2 as the client spoke it, and curl takes
    /// the command: it fails to connect (7), not on its options (2).
    @Test(arguments: [
        ("https://127.0.0.1:1/helloworld.Greeter/SayHello", "--http2"),
        ("http://127.0.0.1:1/helloworld.Greeter/SayHello", "--http2-prior-knowledge"),
    ])
    func curlRepeatsTheCallOverHTTP2(_ url: String, _ flag: String) throws {
        let group = try Group()
        let (h2, h1) = try Self.rows(group, url: url)
        let command = try group.cli(["curl", "\(h2)", "--body-dir", group.dir.path])
        #expect(command.status == 0, "\(command.stderr)")
        #expect(command.stdout.contains(" \(flag) "), "\(command.stdout)")
        let ran = try Command.shell(command.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + " -sS --max-time 5 -o /dev/null")
        #expect(ran.status == 7, "curl said \(ran.status): \(ran.stderr)")
        #expect(!(try group.cli(["curl", "\(h1)"]).stdout.contains("--http2")))
    }

    /// The HAR export writes HTTP/2 as Chrome does and passes the strict HAR 1.2 check.
    @Test func harExportOfAnHTTP2CallIsValidAndChromeLike() throws {
        let group = try Group()
        _ = try Self.rows(group, url: "https://grpc.example.com/helloworld.Greeter/SayHello")
        let har = group.dir.appendingPathComponent("h2.har")
        let exported = try group.cli(["export", "--har", har.path])
        #expect(exported.status == 0, "\(exported.stderr)")
        let validator = Command.repoRoot.appendingPathComponent("tests/har/validate.py").path
        let check = try Command.run("/usr/bin/env", ["python3", validator, har.path])
        #expect(check.status == 0, "HAR 1.2 violations: \(check.stdout) \(check.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: har)) as? [String: Any]
        let entries = (document?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
        #expect(entries.count == 2)
        let call = try #require(entries.first)
        #expect((call["request"] as? [String: Any])?["httpVersion"] as? String == "http/2.0")
        #expect((call["response"] as? [String: Any])?["httpVersion"] as? String == "http/2.0")
        #expect(call["connection"] as? String == "c7f3" && call["_streamId"] as? Int == 5)
        #expect(
            (call["response"] as? [String: Any])?["_trailers"] as? [[String: String]]
                == [["name": "grpc-status", "value": "0"], ["name": "grpc-message", "value": "OK"]])
        #expect((entries.last?["request"] as? [String: Any])?["httpVersion"] as? String == "HTTP/1.1")
    }
}
