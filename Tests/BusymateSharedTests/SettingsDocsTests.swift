import Foundation
import Testing

@testable import BusymateShared

/// docs/settings.md documents every key the settings reader knows, and no
/// key it does not: the first cell of each row of a table headed `key`,
/// as a full dotted path in backticks (`devices.list[].name`,
/// `rules[].status`).
@Suite struct SettingsDocsTests {
    static let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/settings.md")

    /// Every path `AppSettings.knownKeys` names (with `networkKeys` and
    /// `Timeouts.keys` inside it), and which of them only hold others.
    static func known() -> (leaves: Set<String>, containers: Set<String>) {
        var all = Set<String>()
        for (parent, keys) in AppSettings.knownKeys {
            for key in keys { all.insert(parent.isEmpty ? key : "\(parent).\(key)") }
        }
        // `devices` holds `devices.port_pool`; `devices.list` holds `devices.list[].name`.
        let containers = all.filter { AppSettings.knownKeys[$0] != nil || AppSettings.knownKeys[$0 + "[]"] != nil }
        return (all.subtracting(containers), containers)
    }

    /// The keys a rule of each action takes.
    static func ruleKeys() -> Set<String> {
        let all = AppSettings.Reader.ruleKeys.values.reduce(AppSettings.Reader.ruleCommonKeys) { $0.union($1) }
        return Set(all.map { "rules[].\($0)" })
    }

    /// The first cells of the rows of every table whose header's first
    /// cell is `key`, and the rows whose first cell is not one key in backticks.
    static func documented(_ text: String) -> (keys: [String], malformed: [String]) {
        var keys: [String] = []
        var malformed: [String] = []
        var inKeyTable = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let row = line.trimmingCharacters(in: .whitespaces)
            guard row.hasPrefix("|") else {
                inKeyTable = false
                continue
            }
            let first =
                row.dropFirst().split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false).first
                .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            if first == "key" {
                inKeyTable = true
                continue
            }
            guard inKeyTable, !first.allSatisfy({ $0 == "-" || $0 == ":" }) else { continue }
            let name = first.dropFirst().dropLast()
            guard first.count > 2, first.hasPrefix("`"), first.hasSuffix("`"), !name.contains("`"), !name.contains(" ") else {
                malformed.append(String(row))
                continue
            }
            keys.append(String(name))
        }
        return (keys, malformed)
    }

    @Test func everyKnownKeyIsDocumentedAndNoOtherIs() throws {
        let text = try String(contentsOf: Self.page, encoding: .utf8)
        let (rows, malformed) = Self.documented(text)
        let (leaves, containers) = Self.known()
        let rules = Self.ruleKeys()
        #expect(Set(Rule.actionNames) == Set(AppSettings.Reader.ruleKeys.keys), "every action has its keys listed")
        #expect(
            malformed.isEmpty, "rows of a key table whose first cell is not one key in backticks:\n\(malformed.joined(separator: "\n"))")

        let documented = Set(rows)
        let twice = Set(rows.filter { key in rows.filter { $0 == key }.count > 1 })
        #expect(twice.isEmpty, "documented more than once in docs/settings.md: \(twice.sorted().joined(separator: ", "))")

        // A key that only holds others (`devices.list`, `upstream_proxy`) may have a row of its own; every other must.
        let required = leaves.union(rules)
        let missing = required.subtracting(documented)
        #expect(
            missing.isEmpty,
            "known to the settings reader but not documented in docs/settings.md: \(missing.sorted().joined(separator: ", "))")
        let unknown = documented.subtracting(required).subtracting(containers)
        #expect(
            unknown.isEmpty,
            "documented in docs/settings.md but not known to the settings reader: \(unknown.sorted().joined(separator: ", "))")
    }

    /// The ignored keys are said in prose, not listed as if they worked.
    @Test func rootOnlyKeysAreMentionedButNotListed() throws {
        let text = try String(contentsOf: Self.page, encoding: .utf8)
        let rows = Set(Self.documented(text).keys)
        for key in AppSettings.rootOnlyKeys.keys.sorted() {
            #expect(text.contains("`\(key)`"), "docs/settings.md does not mention the ignored key \(key)")
            #expect(!rows.contains(key), "docs/settings.md lists the ignored key \(key) in a table")
        }
    }
}
