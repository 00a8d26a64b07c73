import Foundation
import Testing

/// `~proto` and `~grpc` in rules, decided by the tunnel on the live request
/// (curl over HTTP/1.x here; the HTTP/2 leg is the data path's).
extension ApplianceTests {
    @Test func rulesMatchTheHTTPVersionAndGRPCOnTheLiveRequest() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let appliance = try Appliance(settings: nil)
        try appliance.writeSettings(
            Appliance.interceptionSettings(
                include: [],
                extra: """
                    , "rules": [
                      {"name": "h1 gate", "match": "~proto h1 & ~u /h1-gate", "action": "block", "status": 426},
                      {"name": "h2 gate", "match": "~proto h2 & ~u /h2-gate", "action": "block", "status": 421},
                      {"name": "grpc", "match": "~grpc", "action": "block", "status": 415}
                    ]
                    """))
        try appliance.start()
        let port = try appliance.proxyPort
        let base = "http://127.0.0.1:\(origin.port)"
        #expect(try Command.curl(proxyPort: port, "\(base)/h1-gate").code == 426)
        #expect(try Command.curl(proxyPort: port, "\(base)/h1-gate", extra: ["--http1.0"]).code == 426)
        #expect(try Command.curl(proxyPort: port, "\(base)/h2-gate").code == 200)
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/call", extra: ["-H", "Content-Type: application/grpc+proto", "--data-binary", "x"]
            ).code == 415)
        #expect(
            try Command.curl(
                proxyPort: port, "\(base)/echo-body/json", extra: ["-H", "Content-Type: application/json", "--data-binary", "{}"]
            ).code == 200)
        // The stored rows read the same way: the filter finds what the rule decided on.
        let rows = try appliance.rows("the five are stored") { $0.count == 5 }
        #expect(rows.filter { $0["rule"] as? String == "h1 gate" }.count == 2)
        let h1 = try appliance.cli(["list", "--json", "~proto h1 & ~u /h1-gate"]).stdout
        #expect((try JSONSerialization.jsonObject(with: Data(h1.utf8)) as? [Any])?.count == 2, "\(h1)")
        // `rules test` takes the request as HTTP/1.1, or as HTTP/2 with --http2.
        let asH1 = try appliance.cli(["rules", "test", "\(base)/h2-gate"])
        #expect(asH1.stdout.contains("no rule matches"), "\(asH1.stdout)")
        let asH2 = try appliance.cli(["rules", "test", "\(base)/h2-gate", "--http2"])
        #expect(asH2.stdout.contains("h2 gate") && asH2.stdout.contains("applies"), "\(asH2.stdout)")
    }
}
