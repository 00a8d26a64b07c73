import Foundation
import Testing

@testable import BusymateShared

@Suite struct AppSettingsTests {
    @Test func defaultDocumentDecodesToTheDefaults() throws {
        let (settings, unknown) = try AppSettings.decode(AppSettings.defaultDocument)
        #expect(settings == AppSettings())
        #expect(unknown.isEmpty)
        #expect(settings.listen == [ListenAddress(host: "127.0.0.1", port: 9090)])
    }

    @Test func skeletonFileIsTheDefaultDocument() throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let skeleton = try String(contentsOf: repo.appendingPathComponent("shared-group/settings.json"), encoding: .utf8)
        #expect(skeleton == AppSettings.defaultDocument)
    }

    @Test func everyKeyIsRead() throws {
        let (s, unknown) = try AppSettings.decode(
            """
            {"mode": "proxy", "log_level": "debug",
             "proxy": {"listen": ["127.0.0.1:8080", "[::1]:8081"]},
             "ssl_proxying": {"include": ["*.example.com"], "exclude": ["pinned.example.com"]},
             "tunnel": {"user": "nobody", "group": "nogroup", "drain_seconds": 1.5},
             "capture": {"max_exchanges": 500, "max_bytes": "2GiB", "body_max": 1048576, "max_dns_rows": 300}}
            """)
        #expect(s.maxExchanges == 500 && s.maxBytes == 2 << 30 && s.bodyMax == 1 << 20 && s.maxDNSRows == 300)
        #expect(s.logLevel == .debug)
        #expect(s.listen.map(\.description) == ["127.0.0.1:8080", "[::1]:8081"])
        #expect(s.sslInclude == ["*.example.com"])
        #expect(s.sslExclude == ["pinned.example.com"])
        // Whom the tunnel runs as is not the group-writable file's to say.
        #expect(unknown == ["tunnel.user", "tunnel.group"])
        #expect(s.drainSeconds == 1.5)
    }

    @Test func theDNSRowsCapIsAWholeNumberLikeTheExchangesCap() {
        for bad in ["0", "1.5", "\"many\"", "100000001"] {
            #expect(throws: SettingsError.self, "\(bad)") { try AppSettings.decode(#"{"capture": {"max_dns_rows": \#(bad)}}"#) }
        }
        #expect(AppSettings().maxDNSRows == 10_000)
    }

    @Test func syntaxErrorsCarryLineAndColumn() {
        // A missing comma at the start of line 3.
        let e = AppSettings.decodeError("{\n  \"mode\": \"proxy\"\n  \"log_level\": \"info\"\n}")
        #expect(e?.position == SourcePosition(line: 3, column: 3))
        #expect(e?.description.hasPrefix("3:3: ") == true)
        #expect(AppSettings.decodeError("{\"a\": [1, 2,]}")?.position == SourcePosition(line: 1, column: 13))
        #expect(AppSettings.decodeError("")?.message.contains("empty") == true)
        #expect(AppSettings.decodeError("{\"mode\": \"proxy\"")?.message.contains("end of file") == true)
        #expect(AppSettings.decodeError("{\"x\": 1, \"x\": 2}")?.message == "duplicate key \"x\"")
    }

    @Test func invalidValuesPointAtTheValue() {
        let text = """
            {
              "proxy": {
                "listen": ["127.0.0.1:9090", "nine"]
              }
            }
            """
        let e = AppSettings.decodeError(text)
        #expect(e?.position == SourcePosition(line: 3, column: 34))
        #expect(e?.keyPath == "proxy.listen[1]")
        #expect(AppSettings.decodeError("{\"mode\": \"vpn\"}")?.message.contains("use \"proxy\", \"transparent\"") == true)
        #expect(AppSettings.decodeError("{\"log_level\": \"loud\"}")?.keyPath == "log_level")
        #expect(AppSettings.decodeError("{\"proxy\": {\"listen\": []}}")?.keyPath == "proxy.listen")
        #expect(AppSettings.decodeError("{\"proxy\": {\"listen\": [\"localhost:9090\"]}}")?.keyPath == "proxy.listen[0]")
        #expect(AppSettings.decodeError("{\"proxy\": {\"listen\": [\"127.0.0.1:70000\"]}}") != nil)
        #expect(AppSettings.decodeError("{\"ssl_proxying\": {\"include\": [\"https://x.com\"]}}")?.keyPath == "ssl_proxying.include[0]")
        #expect(AppSettings.decodeError("{\"tunnel\": {\"user\": \"\"}}") == nil)
        #expect(AppSettings.decodeError("{\"tunnel\": \"busymate\"}")?.message == "expected an object, found a string")
        #expect(AppSettings.decodeError("[]")?.message == "expected an object, found an array")
        #expect(AppSettings.decodeError("{\"capture\": {\"body_max\": \"lots\"}}")?.keyPath == "capture.body_max")
        #expect(AppSettings.decodeError("{\"capture\": {\"body_max\": -1}}")?.keyPath == "capture.body_max")
        #expect(AppSettings.decodeError("{\"capture\": {\"max_bytes\": \"1KiB\"}}")?.keyPath == "capture.max_bytes")
        #expect(AppSettings.decodeError("{\"capture\": {\"max_bytes\": true}}")?.message.hasPrefix("expected a size") == true)
        #expect(AppSettings.decodeError("{\"ssl_proxying\": {\"auto_pin\": \"yes\"}}")?.keyPath == "ssl_proxying.auto_pin")
        #expect(AppSettings.decodeError("{\"ssl_proxying\": {\"pin_ttl\": \"1y\"}}")?.keyPath == "ssl_proxying.pin_ttl")
        #expect(AppSettings.decodeError("{\"ssl_proxying\": {\"pin_ttl\": 0}}")?.keyPath == "ssl_proxying.pin_ttl")
        #expect(AppSettings.decodeError("{\"ssl_proxying\": {\"pin_loopback\": 1}}")?.keyPath == "ssl_proxying.pin_loopback")
    }

    @Test func theTunnelIdleTimeoutIsGenerousAndValidated() throws {
        #expect(AppSettings().timeouts.tunnelIdle == 600)
        let (s, unknown) = try AppSettings.decode("{\"timeouts\": {\"tunnel_idle_seconds\": 30}}")
        #expect(s.timeouts.tunnelIdle == 30 && unknown.isEmpty)
        #expect(AppSettings.decodeError("{\"timeouts\": {\"tunnel_idle_seconds\": 0}}")?.keyPath == "timeouts.tunnel_idle_seconds")
        #expect(AppSettings.decodeError("{\"timeouts\": {\"tunnel_idle_seconds\": \"10m\"}}")?.keyPath == "timeouts.tunnel_idle_seconds")
    }

    @Test func pinSettingsAreRead() throws {
        let settings = try AppSettings.decode(#"{"ssl_proxying": {"auto_pin": false, "pin_ttl": "30m"}}"#).settings
        #expect(settings.autoPin == false && settings.pinTTL == 1800)
        #expect(try AppSettings.decode(#"{"ssl_proxying": {"pin_ttl": 90}}"#).settings.pinTTL == 90)
        #expect(try AppSettings.decode("{}").settings.autoPin && AppSettings().pinTTL == 86_400)
        #expect(
            try !AppSettings.decode("{}").settings.pinLoopback
                && AppSettings.decode(#"{"ssl_proxying": {"pin_loopback": true}}"#).settings.pinLoopback)
    }

    @Test func columnsCountCharactersNotBytes() {
        let e = AppSettings.decodeError("{\"é\": 1, \"log_level\": 7}")
        #expect(e?.position == SourcePosition(line: 1, column: 23))
    }

    @Test func unknownKeysAreReportedAndKeptOnEdit() throws {
        let dir = try TestDirectory()
        let file = dir.url.appendingPathComponent("settings.json")
        try Data("{\n  \"future_feature\": {\"on\": true},\n  \"mode\": \"proxy\"\n}\n".utf8).write(to: file)
        let before = SettingsFile.read(file)
        #expect(before.unknownKeys == ["future_feature"])
        try SettingsFile.edit(file) { root in
            root.set("log_level", JSONNode(.string("debug")))
        }
        let after = SettingsFile.read(file)
        #expect(after.settings?.logLevel == .debug)
        #expect(after.unknownKeys == ["future_feature"])
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(text.contains("\"future_feature\": {\n    \"on\": true\n  }"))
        #expect(before.sha256 != after.sha256)
    }

    @Test func editRefusesToWriteInvalidSettings() throws {
        let dir = try TestDirectory()
        let file = dir.url.appendingPathComponent("settings.json")
        try Data(AppSettings.defaultDocument.utf8).write(to: file)
        #expect(throws: SettingsError.self) {
            try SettingsFile.edit(file) { root in root.set("mode", JSONNode(.string("warp"))) }
        }
        #expect(try String(contentsOf: file, encoding: .utf8) == AppSettings.defaultDocument)
    }

    @Test func snapshotHashesTheBytesRead() {
        let a = SettingsFile.parse(Data("{}".utf8))
        #expect(a.sha256 == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
        #expect(a.settings == AppSettings())
        let bad = SettingsFile.parse(Data("{".utf8))
        #expect(bad.settings == nil && bad.error != nil && bad.sha256.count == 64)
    }
}
