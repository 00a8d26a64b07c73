import Foundation
import Testing

/// A peer that shuts its write side still gets everything in flight: the
/// half-close is passed on (a tunnel) or taken as "no more requests" (HTTP),
/// never as a hang-up.
@Suite(.serialized) struct HalfCloseTests {
    struct Reply: Decodable {
        var reply: String?
        var end: String?
        var greeting: String?
        var greeting_end: String?
        var origin_got: Int?
        var error: String?
    }

    struct ServerFirst: Decodable {
        var greeting: String
        var greeting_end: String
        var origin_got: String?
        var origin_end: String?
    }

    static let script = Command.repoRoot.appendingPathComponent("tests/clients/halfclose.py").path

    static func run<T: Decodable>(_ type: T.Type, _ arguments: [String]) throws -> T {
        let r = try Command.run("/usr/bin/python3", [script] + arguments, timeout: 30)
        guard let data = r.stdout.split(separator: "\n").last.map({ Data($0.utf8) }),
            let value = try? JSONDecoder().decode(T.self, from: data)
        else {
            throw Failure("halfclose.py \(arguments.joined(separator: " ")): \(r.stdout) \(r.stderr)")
        }
        return value
    }

    @Test func aPlainRequestFromAClientThatShutItsWriteSideIsAnswered() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        // The origin takes 300 ms: the client's FIN is in long before the answer.
        let got = try Self.run(Reply.self, ["plain", "\(try appliance.proxyPort)", "http://127.0.0.1:\(origin.port)/slow?ms=300"])
        #expect(got.reply?.hasPrefix("HTTP/1.1 200") == true, "\(got)")
        #expect(got.reply?.hasSuffix("origin GET /slow?ms=300\n") == true, "\(got)")
        // Then the proxy closes: the client will send no other request.
        #expect(got.end == "eof")
        let rows = try appliance.rows("the exchange is stored", until: { !$0.isEmpty })
        #expect(rows.first?["status"] as? Int == 200)
        #expect(rows.first?["error"] == nil || rows.first?["error"] is NSNull, "\(rows)")
    }

    /// Two requests in one write and the FIN right behind them (`printf … | nc -N`):
    /// both are answered in order, the second says it is the last, then the proxy closes.
    @Test func pipelinedRequestsFromAClientThatShutItsWriteSideAreAllAnswered() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance()
        try appliance.start()
        let base = "http://127.0.0.1:\(origin.port)"
        let got = try Self.run(Reply.self, ["pipelined", "\(try appliance.proxyPort)", "\(base)/slow?ms=200", "\(base)/slow?ms=100"])
        let reply = got.reply ?? ""
        let answers = reply.components(separatedBy: "HTTP/1.1 200").dropFirst()
        #expect(answers.count == 2, "\(got)")
        #expect(answers.first?.contains("origin GET /slow?ms=200") == true, "\(got)")
        #expect(answers.last?.hasSuffix("origin GET /slow?ms=100\n") == true, "\(got)")
        #expect(answers.last?.lowercased().contains("connection: close\r\n") == true, "\(got)")
        #expect(got.end == "eof")
        let rows = try appliance.rows("both exchanges are stored", until: { $0.count == 2 })
        #expect(rows.allSatisfy { $0["status"] as? Int == 200 && ($0["error"] == nil || $0["error"] is NSNull) }, "\(rows)")
    }

    @Test func anInterceptedRequestAfterTheClientsCloseNotifyIsAnswered() async throws {
        let origin = try await Origin.tls()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance.intercepting(origin)
        let got = try Self.run(
            Reply.self, ["mitm", "\(try appliance.proxyPort)", "localhost:\(origin.port)", "/slow?ms=300", appliance.caFile.path])
        #expect(got.reply?.hasPrefix("HTTP/1.1 200") == true, "\(got)")
        #expect(got.reply?.hasSuffix("origin GET /slow?ms=300\n") == true, "\(got)")
        // The proxy answers our close_notify with its own once the answer is out.
        #expect(got.end == "close_notify", "\(got)")
        let rows = try appliance.rows("the exchange is stored", until: { $0.contains { $0["status"] as? Int == 200 } })
        #expect(
            rows.contains {
                $0["url"] as? String == "https://localhost:\(origin.port)/slow?ms=300" && ($0["error"] == nil || $0["error"] is NSNull)
            }, "\(rows)")
    }

    @Test func aPassedThroughClientsHalfCloseReachesTheServerAndItsAnswerComesBack() throws {
        let appliance = try Appliance()
        try appliance.start()
        let got = try Self.run(Reply.self, ["passthrough-client", "\(try appliance.proxyPort)"])
        #expect(got.origin_got == 100_000, "\(got)")
        #expect(got.reply == "got 100000 bytes", "\(got)")
        #expect(got.end == "eof")
    }

    @Test func aPassedThroughServersHalfCloseReachesTheClientAndTheClientCanStillSend() throws {
        let appliance = try Appliance()
        try appliance.start()
        let got = try Self.run(ServerFirst.self, ["passthrough-server", "\(try appliance.proxyPort)"])
        #expect(got.greeting == "hello" && got.greeting_end == "eof", "\(got)")
        #expect(got.origin_got == "world" && got.origin_end == "eof", "\(got)")
    }
}
