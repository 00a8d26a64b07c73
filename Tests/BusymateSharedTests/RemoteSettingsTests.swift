import BusymateShared
import Testing

@Suite struct RemoteSettingsTests {
    func merged(_ local: String, _ remote: String) throws -> (JSONNode, RemoteSettings.Merge) {
        var root = try JSONParser.parse(local)
        let merge = try RemoteSettings.merge(try JSONParser.parse(remote), into: &root)
        return (root, merge)
    }

    @Test func serverWinsOnItsKeysAndTheRestIsKept() throws {
        let (root, merge) = try merged(
            #"{"mode":"proxy","proxy":{"listen":["127.0.0.1:9090"]},"ssl_proxying":{"include":["a.test"],"exclude":["b.test"]},"x_local":1}"#,
            #"{"ssl_proxying":{"include":["c.test"]},"breakpoints":{"timeout_seconds":5},"connection_type":"vpn","label":null}"#)
        #expect(root["ssl_proxying"]?["include"] == JSONNode(.array([JSONNode(.string("c.test"))])))
        #expect(root["ssl_proxying"]?["exclude"] == JSONNode(.array([JSONNode(.string("b.test"))])), "an object merges key by key")
        #expect(root["breakpoints"]?["timeout_seconds"] == JSONNode(.number("5")))
        #expect(root["proxy"]?["listen"] == JSONNode(.array([JSONNode(.string("127.0.0.1:9090"))])))
        #expect(root["x_local"] == JSONNode(.number("1")), "keys this version does not know are kept")
        #expect(root["mode"] == JSONNode(.string("proxy")), "connection_type is the iOS app's; it does not switch the mode")
        #expect(merge.changed == ["ssl_proxying.include", "breakpoints.timeout_seconds"])
        #expect(merge.ignored == ["connection_type"])
        _ = try AppSettings.decode(JSONWriter.write(root))
    }

    /// What would open the appliance or send its traffic elsewhere is the appliance's own.
    @Test func theAccountCannotOpenOrRerouteTheProxy() throws {
        let local =
            #"{"mode":"proxy","proxy":{"listen":["127.0.0.1:9090"]},"web":{"listen":"127.0.0.1:9091"},"ssl_proxying":{"include":[]}}"#
        let (root, merge) = try merged(
            local,
            #"""
            {"mode":"transparent","proxy":{"listen":["0.0.0.0:9090"]},"web":{"listen":"0.0.0.0:80"},"access":{"allow":["0.0.0.0/0"]},
             "upstream_proxy":{"scheme":"http","host":"evil.test","port":8080},"ssl_proxying":{"insecure_upstream":true,"upstream_trust":"/tmp/x.pem"},
             "transparent":{"interfaces":["eth0"]},"grpc":{"descriptor_sets":["/etc/shadow"]},"capture":{"max_bytes":1},"log_level":"trace","rules":[]}
            """#)
        #expect(root == (try JSONParser.parse(local)), "nothing changed")
        #expect(merge.changed.isEmpty)
        #expect(
            Set(merge.ignored) == [
                "mode", "proxy", "web", "access", "upstream_proxy", "ssl_proxying.insecure_upstream", "ssl_proxying.upstream_trust",
                "transparent", "grpc", "capture", "log_level", "rules",
            ])
    }

    @Test func theSeedsNamesAreReadAsOurs() throws {
        let (root, merge) = try merged(
            #"{"breakpoints":{"timeout_seconds":30}}"#,
            #"{"ssl_proxy_domains":["api.test"],"breakpoint_request_patterns":["api.test/a*"],"breakpoint_patterns":["api.test/legacy","api.test/a*"],"breakpoint_response_patterns":[]}"#
        )
        #expect(root["ssl_proxying"]?["include"] == JSONNode(.array([JSONNode(.string("api.test"))])))
        #expect(
            root["breakpoints"]?["request"] == JSONNode(.array([JSONNode(.string("api.test/a*")), JSONNode(.string("api.test/legacy"))])),
            "the legacy list folds into the request patterns, once each")
        #expect(root["breakpoints"]?["timeout_seconds"] == JSONNode(.number("30")))
        #expect(Set(merge.changed) == ["ssl_proxying.include", "breakpoints.request", "breakpoints.response"])
        _ = try AppSettings.decode(JSONWriter.write(root))
    }

    @Test func nothingNewChangesNothing() throws {
        let (_, merge) = try merged(
            #"{"ssl_proxying":{"include":["a.test"]}}"#, #"{"ssl_proxying":{"include":["a.test"]},"ssl_proxy_domains":null}"#)
        #expect(merge.changed.isEmpty && merge.ignored.isEmpty)
    }

    @Test func notAnObjectIsRefused() throws {
        var root = try JSONParser.parse("{}")
        #expect(throws: RemoteSettings.Invalid.self) { try RemoteSettings.merge(try JSONParser.parse("[1]"), into: &root) }
        #expect(throws: RemoteSettings.Invalid.self) {
            try RemoteSettings.merge(try JSONParser.parse(#"{"ssl_proxy_domains":"a.test"}"#), into: &root)
        }
    }
}
