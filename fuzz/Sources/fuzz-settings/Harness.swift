// settings.json as every process reads it (SettingsFile.parse: the
// position-keeping JSONParser, then AppSettings' validation of every key,
// rules and breakpoints included), applied the way both daemons apply a
// save (AppliedSettings), and rewritten the way the CLI edits it
// (JSONWriter, SettingsFile.setStrings).
//
// Properties:
// - an error names a line within the file and a column of at least 1;
// - the same bytes applied twice are applied once (hot reload is idempotent);
// - JSONWriter's text parses back to the same document, and decodes to the
//   same settings or to the same error (the CLI's rewrite changes nothing
//   but the layout);
// - a list the CLI sets reads back as set, and unknown keys survive;
// - a valid file's values are usable: listen addresses print and parse
//   back, every rule's pattern compiles again from its text.
import BusymateShared
import Foundation
import FuzzSupport
import Logging

let logger = Logger(label: "fuzz")
let defaults: SettingsSnapshot = {
    let snapshot = SettingsFile.parse(Data(AppSettings.defaultDocument.utf8))
    guard snapshot.settings != nil else { fatalError("the default document does not decode") }
    return snapshot
}()
let sampleURLs = [
    "https://api.example.com/v1/users?page=2", "http://example.com/", "https://[::1]:8443/x", "http://ads.example.com:8080/a#b",
]
let sampleHosts = ["example.com", "api.example.com", "EXAMPLE.COM.", "[::1]", "127.0.0.1", "bücher.example"]

func sameOutcome(_ a: Result<AppSettings, SettingsError>, _ b: Result<AppSettings, SettingsError>) -> Bool {
    switch (a, b) {
    case let (.success(x), .success(y)): return x == y
    case let (.failure(x), .failure(y)): return x.message == y.message && x.keyPath == y.keyPath
    default: return false
    }
}

func decode(_ root: JSONNode) -> Result<AppSettings, SettingsError> {
    do {
        return .success(try AppSettings.decode(root).settings)
    } catch {
        return .failure(error)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        let snapshot = SettingsFile.parse(Data(bytes))
        Fuzz.check(snapshot.sha256.count == 64, "SHA-256 \(snapshot.sha256)")
        if let error = snapshot.error, let position = error.position {
            let lines = bytes.count { $0 == 0x0A } + 1
            Fuzz.check(
                position.line >= 1 && position.line <= lines && position.column >= 1,
                "error at \(position) in a file of \(lines) lines: \(error)")
        }

        // Hot reload: applied, then the same save again is nothing new.
        var applied = AppliedSettings(defaults)
        switch applied.apply(snapshot, logger: logger) {
        case .applied:
            Fuzz.check(snapshot.settings != nil && applied.settings == snapshot.settings, "applied settings differ from the file's")
            if case .unchanged = applied.apply(snapshot, logger: logger) {} else { Fuzz.check(false, "the same save applied twice") }
        case .unchanged:
            Fuzz.check(snapshot.sha256 == defaults.sha256, "unchanged, yet not the default document")
        case .rejected:
            Fuzz.check(snapshot.error != nil && applied.settings == defaults.settings, "a rejected file changed the settings in force")
        }

        // The CLI's rewrite.
        if let root = try? JSONParser.parse(bytes) {
            let text = JSONWriter.write(root)
            guard let again = try? JSONParser.parse(text) else {
                Fuzz.check(false, "JSONWriter wrote what JSONParser refuses: \(Fuzz.show(text))")
                return
            }
            Fuzz.check(again == root, "JSONWriter's text parses to another document: \(Fuzz.show(text))")
            Fuzz.check(
                sameOutcome(decode(root), decode(again)), "the rewritten file decodes differently: \(decode(root)) vs \(decode(again))")
            if case let .object(members) = root.value {
                var edited = root
                SettingsFile.setStrings(["fuzz.example", "*.test"], in: &edited, at: ["ssl_proxying", "include"])
                if let reread = try? JSONParser.parse(JSONWriter.write(edited)) {
                    Fuzz.check(
                        SettingsFile.strings(in: reread, at: ["ssl_proxying", "include"]) == ["fuzz.example", "*.test"],
                        "a list set by the CLI reads back otherwise")
                    for member in members where member.key != "ssl_proxying" {
                        Fuzz.check(reread[member.key] == member.node, "the CLI's edit lost or changed \(Fuzz.show(member.key))")
                    }
                } else {
                    Fuzz.check(false, "the CLI's edit writes what JSONParser refuses")
                }
            }
        }

        // A valid file: its values as the processes use them.
        guard let settings = snapshot.settings else { return }
        for address in settings.listen {
            Fuzz.check(
                ListenAddress(address.description) == address, "listen address \(Fuzz.show(address.description)) does not parse back")
        }
        for rule in settings.rules {
            let again = try? RuleMatch.parse(rule.match.text, for: rule.kind).get()
            Fuzz.check(again == rule.match, "rule \(Fuzz.show(rule.name)): its match does not compile again")
            for url in sampleURLs { _ = rule.match.matches(FilterSubject(url: url)) }
        }
        for pattern in settings.breakpoints.request + settings.breakpoints.response {
            for url in sampleURLs { _ = pattern.matches(FilterSubject(url: url)) }
        }
        for host in sampleHosts {
            _ = settings.sslProxying.shouldIntercept(host: host)
            _ = settings.insecureUpstreamMatcher.shouldIntercept(host: host)
            _ = settings.upstreamProxy?.carries(host)
        }
        _ = settings.upstreamProxy?.authorization
    }
}
