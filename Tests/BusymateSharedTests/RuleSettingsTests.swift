import Foundation
import Testing

@testable import BusymateShared

@Suite struct RuleSettingsTests {
    @Test func everyRuleKindBreakpointsAndTheUpstreamProxyAreRead() throws {
        let (s, unknown) = try AppSettings.decode(
            """
            {
              "rules": [
                {"name": "no ads", "match": "*.ads.test/*", "action": "block"},
                {"name": "teapot", "match": "api.test/brew", "action": "block", "status": 418},
                {"name": "cut", "enabled": false, "match": "tracker.test/*", "action": "drop"},
                {"name": "config", "match": "api.test/v1/config", "action": "map_local", "file": "/srv/mock/config.json"},
                {"name": "static", "match": "cdn.test/*", "action": "map_local", "directory": "/srv/static"},
                {"name": "staging", "match": "api.test/*", "action": "map_remote", "to": "http://127.0.0.1:3000/"},
                {"name": "pin", "match": "api.test", "action": "host_override", "address": "::1"},
                {"name": "trace", "match": "*", "action": "headers",
                 "request": {"remove": ["Cookie"], "set": {"User-Agent": "busymate"}, "add": {"X-Trace": "1"}},
                 "response": {"remove": ["Set-Cookie"]}}
              ],
              "breakpoints": {"request": ["api.test/v1/*"], "response": ["api.test/v1/orders"], "timeout_seconds": 30},
              "upstream_proxy": {"host": "proxy.corp.test", "port": 3128, "username": "u", "password": "p:w", "bypass": ["*.local"]}
            }
            """)
        #expect(unknown.isEmpty)
        #expect(s.rules.map(\.name) == ["no ads", "teapot", "cut", "config", "static", "staging", "pin", "trace"])
        #expect(s.rules.map(\.kind) == [.block, .block, .block, .mapLocal, .mapLocal, .mapRemote, .hostOverride, .headers])
        #expect(s.rules[0].action == .block(status: 403))
        #expect(s.rules[1].action == .block(status: 418))
        #expect(s.rules[2].action == .drop && !s.rules[2].enabled && s.rules[0].enabled)
        #expect(s.rules[3].action == .mapLocal(file: "/srv/mock/config.json", directory: nil))
        #expect(s.rules[4].action == .mapLocal(file: nil, directory: "/srv/static"))
        #expect(s.rules[5].action == .mapRemote(to: "http://127.0.0.1:3000/"))
        #expect(s.rules[6].action == .hostOverride(address: "::1"))
        var request = Rule.HeaderEdits()
        request.remove = ["Cookie"]
        request.set = [("User-Agent", "busymate")]
        request.add = [("X-Trace", "1")]
        var response = Rule.HeaderEdits()
        response.remove = ["Set-Cookie"]
        #expect(s.rules[7].action == .headers(request: request, response: response))
        #expect(s.rules[0].match.matches(FilterSubject(url: "https://x.ads.test/banner.js")))
        #expect(s.breakpoints.request.map(\.text) == ["api.test/v1/*"] && s.breakpoints.response.map(\.text) == ["api.test/v1/orders"])
        #expect(s.breakpoints.timeoutSeconds == 30)
        // 0 or "never": held until resolved, no deadline.
        for never in ["0", #""never""#] {
            let b = try AppSettings.decode(#"{"breakpoints": {"timeout_seconds": \#(never)}}"#).settings.breakpoints
            #expect(b.timeoutSeconds == 0 && b.expiry(pausedAt: Date()) == nil)
        }
        #expect(s.breakpoints.expiry(pausedAt: Date(timeIntervalSince1970: 0)) == Date(timeIntervalSince1970: 30))
        #expect(
            s.upstreamProxy
                == UpstreamProxySetting(host: "proxy.corp.test", port: 3128, username: "u", password: "p:w", bypass: ["*.local"]))
        #expect(s.upstreamProxy?.bypass.shouldIntercept(host: "printer.local") == true)
        #expect(s.upstreamProxy?.carries("printer.local") == false && s.upstreamProxy?.carries("api.test") == true)
        #expect(s.upstreamProxy?.authorization == "Basic dTpwOnc=")
        #expect(UpstreamProxySetting(host: "p", port: 1).authorization == nil)
        #expect(s.upstreamProxy?.scheme == .http)
        // A SOCKS5 proxy: its credentials go in RFC 1929's exchange, never as Proxy-Authorization.
        let (socks, socksUnknown) = try AppSettings.decode(
            """
            {"upstream_proxy": {"scheme": "socks5", "host": "127.0.0.1", "port": 1080, "username": "u:1", "password": "p"}}
            """)
        #expect(socksUnknown.isEmpty)
        #expect(socks.upstreamProxy == UpstreamProxySetting(scheme: .socks5, host: "127.0.0.1", port: 1080, username: "u:1", password: "p"))
        #expect(socks.upstreamProxy?.authorization == nil)
        // Nothing set: no rules, no breakpoints, a direct upstream.
        let (defaults, _) = try AppSettings.decode("{}")
        #expect(
            defaults.rules.isEmpty && defaults.breakpoints.isEmpty && defaults.breakpoints.timeoutSeconds == 60
                && defaults.upstreamProxy == nil)
    }

    /// (document, key path of the error, words its message has)
    static let refused: [(String, String, String)] = [
        (#"{"rules": {}}"#, "rules", "expected an array of rules"),
        (#"{"rules": [{"name": "a", "match": "x.test"}]}"#, "rules[0]", "needs \"action\""),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "redirect"}]}"#, "rules[0].action", "not an action"),
        (#"{"rules": [{"match": "x.test", "action": "block"}]}"#, "rules[0]", "needs a \"name\""),
        (#"{"rules": [{"name": " ", "match": "x.test", "action": "block"}]}"#, "rules[0].name", "cannot be empty"),
        (#"{"rules": [{"name": "a", "action": "block"}]}"#, "rules[0]", "needs \"match\""),
        (#"{"rules": [{"name": "a", "match": "/x", "action": "block"}]}"#, "rules[0].match", "starts with a host"),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "block", "enabled": "yes"}]}"#, "rules[0].enabled", "true or false"),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "block", "directroy": "/x"}]}"#, "rules[0].directroy",
            "not a key of a block rule"
        ),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "block", "status": 200}]}"#, "rules[0].status", "400 to 599"),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "map_local"}]}"#, "rules[0]", "either \"file\" or \"directory\""),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "map_local", "file": "/a", "directory": "/b"}]}"#, "rules[0]", "either"),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "map_local", "file": "mock.json"}]}"#, "rules[0].file", "absolute path"),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "map_remote", "to": "ftp://x"}]}"#, "rules[0].to", "not an http"),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "map_remote"}]}"#, "rules[0]", "needs \"to\""),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "host_override", "address": "example.com"}]}"#, "rules[0].address",
            "not an IP address"
        ),
        (#"{"rules": [{"name": "a", "match": "x.test", "action": "headers"}]}"#, "rules[0]", "needs \"request\" or \"response\""),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "headers", "request": {"set": {"Bad Name": "1"}}}]}"#,
            "rules[0].request.set.Bad Name", "not a header name"
        ),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "headers", "request": {"add": {"X": "a\r\nB: c"}}}]}"#,
            "rules[0].request.add.X", "line break"
        ),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "headers", "request": {"rename": {}}}]}"#, "rules[0].request.rename",
            "remove, set or add"
        ),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "headers", "response": {"remove": ["Content-Length"]}}]}"#,
            "rules[0].response.remove[0]", "frames the message"
        ),
        (
            #"{"rules": [{"name": "a", "match": "x.test", "action": "block"}, {"name": "a", "match": "y.test", "action": "drop"}]}"#,
            "rules[1].name", "another rule"
        ),
        // A match that starts with ~, ! or ( is a filter, refused as the filter language refuses it.
        (
            #"{"rules": [{"name": "a", "match": "~c 4x5", "action": "headers", "response": {"add": {"X": "1"}}}]}"#, "rules[0].match",
            "position 4: a status is"
        ),
        (#"{"rules": [{"name": "a", "match": "(~d x", "action": "block"}]}"#, "rules[0].match", "never closed"),
        (#"{"rules": [{"name": "a", "match": "!~zz", "action": "block"}]}"#, "rules[0].match", "unknown filter ~zz"),
        // ... and where the rule cannot know the answer when it acts.
        (
            #"{"rules": [{"name": "a", "match": "~d x & ~c 404", "action": "block"}]}"#, "rules[0].match",
            "~c reads the response, and a block rule acts before"
        ),
        (
            #"{"rules": [{"name": "a", "match": "~ts json", "action": "map_remote", "to": "http://y.test/"}]}"#, "rules[0].match",
            "~ts reads the response"
        ),
        (
            #"{"rules": [{"name": "a", "match": "~b secret", "action": "headers", "request": {"add": {"X": "1"}}}]}"#, "rules[0].match",
            "before the body streams"
        ),
        (#"{"rules": [{"name": "a", "match": "~since 1h", "action": "block"}]}"#, "rules[0].match", "read once"),
        (#"{"rules": [{"name": "a", "match": "~marked", "action": "block"}]}"#, "rules[0].match", "no mark or comment yet"),
        (#"{"rules": [{"name": "a", "match": "~dst :443", "action": "block"}]}"#, "rules[0].match", "match its name with ~d"),
        (#"{"rules": [{"name": "a", "match": "~rule x", "action": "block"}]}"#, "rules[0].match", "which rules applied"),
        (#"{"breakpoints": {"request": ["https://"]}}"#, "breakpoints.request[0]", "starts with a host"),
        (
            #"{"breakpoints": {"request": ["~d api", "~d api & ~c 404"]}}"#, "breakpoints.request[1]",
            "a request breakpoint acts before there is one"
        ),
        (#"{"breakpoints": {"response": ["~bs token"]}}"#, "breakpoints.response[0]", "before the body streams"),
        (#"{"breakpoints": {"timeout_seconds": 0.5}}"#, "breakpoints.timeout_seconds", "from 1 to 3600, or 0 or \"never\""),
        (#"{"breakpoints": {"timeout_seconds": 3601}}"#, "breakpoints.timeout_seconds", "from 1 to 3600"),
        (#"{"breakpoints": {"timeout_seconds": "soon"}}"#, "breakpoints.timeout_seconds", "or 0 or \"never\" to hold until resolved"),
        (#"{"upstream_proxy": {"port": 3128}}"#, "upstream_proxy", "needs \"host\""),
        (#"{"upstream_proxy": {"host": "p.test"}}"#, "upstream_proxy", "needs \"port\""),
        (#"{"upstream_proxy": {"host": "p.test", "port": 0}}"#, "upstream_proxy.port", "1 to 65535"),
        (#"{"upstream_proxy": {"host": "*.test", "port": 1}}"#, "upstream_proxy.host", "not a host name"),
        (#"{"upstream_proxy": {"host": "p.test", "port": 1, "username": "u"}}"#, "upstream_proxy", "both"),
        (#"{"upstream_proxy": {"host": "p.test", "port": 1, "bypass": ["http://x"]}}"#, "upstream_proxy.bypass[0]", "without a scheme"),
        (#"{"upstream_proxy": {"scheme": "socks4", "host": "p.test", "port": 1}}"#, "upstream_proxy.scheme", "\"http\" or \"socks5\""),
        (
            #"{"upstream_proxy": {"scheme": "socks5", "host": "p.test", "port": 1, "username": "", "password": "p"}}"#,
            "upstream_proxy.username", "1 to 255 bytes"
        ),
    ]

    @Test(arguments: refused)
    func badRulesAreRefusedWithWhereAndWhy(_ document: String, _ keyPath: String, _ words: String) {
        let e = AppSettings.decodeError(document)
        #expect(e?.keyPath == keyPath, "\(document): \(e?.description ?? "accepted")")
        #expect(e?.message.contains(words) == true, "\(document): \(e?.description ?? "accepted")")
        #expect(e?.position != nil)
    }

    @Test func anErrorInARulePointsAtItsLineAndColumn() {
        let e = AppSettings.decodeError(
            """
            {
              "rules": [
                {"name": "ok", "match": "x.test", "action": "block"},
                {"name": "bad", "match": "x.test", "action": "map_local", "file": "relative.json"}
              ]
            }
            """)
        #expect(e?.position == SourcePosition(line: 4, column: 71))
        #expect(e?.description == "4:71: rules[1].file: \"relative.json\" must be an absolute path")
    }
}
