import Foundation
import Testing

/// Breakpoints whose patterns are filters (mitmproxy's intercept takes one):
/// settings.json and the CLI → the tunnel holds what the filter matches.
extension ApplianceTests {
    @Test func breakpointsHoldWhatAFilterMatches() async throws {
        let origin = try await Origin.plain()
        defer { Task { await origin.stop() } }
        let settings = Appliance.interceptionSettings(
            include: ["localhost"],
            extra: #"""
                , "breakpoints": {"request": ["~m POST & ~u /echo-body/f"], "response": ["~ts json & ~d ^127\\.0\\.0\\.1$"], "timeout_seconds": 60}
                """#)
        let appliance = try Appliance(settings: settings)
        try appliance.start()
        let base = "http://127.0.0.1:\(origin.port)"

        // The method decides: a POST is held, a GET to the same URL goes through.
        let post = try appliance.startCurl(["-d", "a=1", "\(base)/echo-body/f"])
        let held = try appliance.held(1)
        #expect(held[0]["kind"] as? String == "request" && held[0]["url"] as? String == "\(base)/echo-body/f")
        #expect(try appliance.curl("\(base)/echo-body/f").code == 200)
        #expect(try appliance.cli(["breakpoints", "continue", "\(held[0]["id"] as? Int ?? 0)"]).status == 0)
        #expect(try post.finish().stdout.hasSuffix("a=1\n200"))

        // The response's Content-Type decides: JSON is held, text goes through.
        let json = try appliance.startCurl(["--compressed", "\(base)/gzip"])
        let response = try appliance.held(1)
        #expect(response[0]["kind"] as? String == "response" && (response[0]["url"] as? String)?.hasSuffix("/gzip") == true)
        #expect(try appliance.curl("\(base)/plain").code == 200)
        #expect(try appliance.cli(["breakpoints", "continue", "\(response[0]["id"] as? Int ?? 0)"]).status == 0)
        #expect(try json.finish().stdout.contains("\"compressed\":true"))

        // The CLI takes a filter, and refuses one a request breakpoint cannot decide.
        let refused = try appliance.cli(["breakpoints", "add", "request", "~c 404"])
        #expect(
            refused.status != 0 && refused.stderr.contains("~c reads the response, and a request breakpoint acts before there is one"),
            "\(refused.stderr)")
        let added = try appliance.cli(["breakpoints", "add", "response", "~c 404"])
        #expect(added.status == 0, "\(added.stderr)")
        let listed = try appliance.cli(["breakpoints", "list-patterns"]).stdout
        #expect(listed.contains("~c 404") && listed.contains("~m POST & ~u /echo-body/f"), "\(listed)")
    }
}
