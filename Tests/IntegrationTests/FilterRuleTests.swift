import Foundation
import Testing

/// Rules that match with the filter language, end to end: settings.json and
/// the CLI → the tunnel, deciding on the live exchange → curl and the store.
extension ApplianceTests {
    @Test func rulesMatchWithTheFilterLanguageOnTheLiveExchange() async throws {
        let origin = try await Origin.plain()
        let tlsOrigin = try await Origin.tls()
        defer {
            Task {
                await origin.stop()
                await tlsOrigin.stop()
            }
        }
        let appliance = try Appliance(settings: nil)
        let trust = try appliance.trust(tlsOrigin)
        try appliance.writeSettings(
            Appliance.interceptionSettings(
                include: ["localhost"], trust: trust,
                extra: """
                    , "rules": [
                      {"name": "beta gate", "match": "~hq \\"x-beta: 1\\" & ~d ^localhost$", "action": "block", "status": 451},
                      {"name": "posts", "match": "~m POST & ~u /echo-headers", "action": "headers", "request": {"set": {"X-Posted": "yes"}}},
                      {"name": "json tag", "match": "~ts json", "action": "headers", "response": {"set": {"X-Json": "1"}}},
                      {"name": "moved", "match": "~d 127.0.0.1 & ~u ^http://[^/]+/old", "action": "map_remote", "to": "http://127.0.0.1:\(origin.port)/echo-body"},
                      {"name": "glob", "match": "*/glob-blocked", "action": "block", "status": 410},
                      {"name": "slow", "match": "~u \\"(a+)+b\\"", "action": "block"}
                    ]
                    """))
        try appliance.start()
        let proxy = "http://127.0.0.1:\(try appliance.proxyPort)"
        let tls = "https://localhost:\(tlsOrigin.port)"
        func curl(_ args: [String]) throws -> CommandResult {
            try Command.run("/usr/bin/curl", ["-sS", "-i", "--max-time", "10", "--cacert", appliance.caFile.path, "-x", proxy] + args)
        }
        func status(_ r: CommandResult) -> String {
            // The last head's status (through CONNECT, curl -i shows the proxy's 200 first); HTTP/1.1 or HTTP/2.
            let line = r.stdout.components(separatedBy: "\r\n").last { $0.hasPrefix("HTTP/") } ?? ""
            return "HTTP " + (line.split(separator: " ").dropFirst().first.map(String.init) ?? "")
        }

        // A request header decides a block, inside an intercepted tunnel.
        #expect(status(try curl(["-H", "X-Beta: 1", "\(tls)/plain"])).hasPrefix("HTTP 451"))
        #expect(status(try curl(["\(tls)/plain"])).hasPrefix("HTTP 200"))
        // The method decides a header edit: the origin sees it on POST only.
        let post = try curl(["-d", "x=1", "\(tls)/echo-headers"])
        #expect(post.stdout.contains("X-Posted: yes\n"), "\(post.stdout)")
        let get = try curl(["\(tls)/echo-headers"])
        #expect(!get.stdout.contains("X-Posted"), "\(get.stdout)")
        // The response's Content-Type decides a response edit: JSON gets it, text does not.
        let json = try curl(["--compressed", "http://127.0.0.1:\(origin.port)/gzip"])
        #expect(json.stdout.contains("X-Json: 1\r\n") && json.stdout.contains("\"compressed\":true"), "\(json.stdout)")
        let text = try curl(["http://127.0.0.1:\(origin.port)/plain"])
        #expect(!text.stdout.contains("X-Json"), "\(text.stdout)")
        // map_remote with a filter keeps the whole path under `to`'s.
        #expect(try curl(["http://127.0.0.1:\(origin.port)/old/page"]).stdout.contains("origin GET /echo-body/old/page"))
        // URL patterns still work beside filters.
        #expect(status(try curl(["http://127.0.0.1:\(origin.port)/glob-blocked"])).hasPrefix("HTTP 410"))

        // A regular expression that backtracks past the request's budget is no match, and the row says so.
        #expect(status(try curl(["http://127.0.0.1:\(origin.port)/" + String(repeating: "a", count: 40)])).hasPrefix("HTTP 200"))

        // A rule added from the CLI with a filter is in force for the next request.
        let added = try appliance.cli(["rules", "add", "puts", "--match", "~m PUT", "--action", "block", "--status", "405"])
        #expect(added.status == 0, "\(added.stderr)")
        #expect(status(try curl(["-X", "PUT", "http://127.0.0.1:\(origin.port)/plain"])).hasPrefix("HTTP 405"))
        // A filter the tunnel could not decide on is refused with where and why, and nothing changes.
        let refused = try appliance.cli(["rules", "add", "late", "--match", "~c 404", "--action", "block"])
        #expect(
            refused.status != 0 && refused.stderr.contains("~c reads the response, and a block rule acts before there is one"),
            "\(refused.stderr)")
        let list = try appliance.cli(["rules", "list"]).stdout
        #expect(list.contains("~m PUT") && !list.contains("late"), "\(list)")
        // rules test takes the method and headers a filter reads.
        let tested = try appliance.cli(["rules", "test", "--method", "POST", "\(tls)/echo-headers"]).stdout
        #expect(tested.contains("posts") && tested.contains("applies"), "\(tested)")
        let beta = try appliance.cli(["rules", "test", "--header", "X-Beta: 1", "--json", "\(tls)/plain"]).stdout
        #expect(beta.contains("\"applied\"") && beta.contains("beta gate"), "\(beta)")
        // A headers rule that reads the response is listed as decided when it comes.
        #expect(beta.contains("\"name\":\"json tag\"") || beta.contains("\"name\": \"json tag\""), "\(beta)")
        #expect(beta.contains("at_response"), "\(beta)")

        // The rows name the rule that applied, a response rule included.
        let rows = try appliance.rows("the exchanges are stored") { rows in
            rows.contains { ($0["method"] as? String) == "PUT" } && rows.contains { ($0["url"] as? String)?.hasSuffix("/gzip") == true }
        }
        func rule(_ suffix: String, _ method: String = "GET", status: Int? = nil) -> String? {
            rows.first { row in
                (row["url"] as? String)?.hasSuffix(suffix) == true && row["method"] as? String == method
                    && (status == nil || row["status"] as? Int == status)
            }?["rule"] as? String
        }
        #expect(rule("/plain", status: 451) == "beta gate")
        #expect(rule("/plain", status: 200) == nil)
        #expect(rule("/echo-headers", "POST") == "posts")
        #expect(rule("/gzip") == "json tag")
        // The row keeps what the client asked for.
        #expect(rule("/old/page") == "moved")
        #expect(rule("/plain", "PUT") == "puts")
        let slow = rows.first { ($0["url"] as? String)?.hasSuffix(String(repeating: "a", count: 40)) == true }
        #expect((slow?["note"] as? String)?.contains("the filter of rule \"slow\" ran past") == true, "\(slow ?? [:])")
        // And the filter finds them by it.
        let listed = try appliance.cli(["list", "--json", "~rule \"json tag\""]).stdout
        #expect(listed.contains("/gzip") && !listed.contains("/plain"), "\(listed)")
    }
}
