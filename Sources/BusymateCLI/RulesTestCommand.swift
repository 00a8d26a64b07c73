import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

extension Rules {
    struct TestURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Show which rules match a URL, and which of them apply.")
        @OptionGroup var options: GroupOption
        @Argument(help: "An absolute URL, e.g. https://api.example.com/v1/users?page=2.") var url: String
        @Flag(help: "Print a JSON object: the URL, the matching rules with why each applies or not, the names of those that apply.") var json = false

        /// Why a matching rule applies or not; `by` names the rule that decides.
        struct Verdict {
            enum Reason: String { case applies, disabled, shadowed, blocked, answeredLocally = "answered_locally" }
            var index: Int
            var rule: Rule
            var reason: Reason
            var by: String?
        }

        /// As the tunnel decides: the first enabled match of each kind; a
        /// block ends it; a local answer is never dialled.
        static func verdicts(_ rules: [Rule], url: String) -> [Verdict] {
            let matching = rules.enumerated().filter { $0.element.pattern.matches(url) }
            var first: [Rule.Kind: String] = [:]
            for (_, rule) in matching where rule.enabled && first[rule.kind] == nil { first[rule.kind] = rule.name }
            return matching.map { i, rule in
                if !rule.enabled { return Verdict(index: i + 1, rule: rule, reason: .disabled) }
                if first[rule.kind] != rule.name { return Verdict(index: i + 1, rule: rule, reason: .shadowed, by: first[rule.kind]) }
                if let block = first[.block], rule.kind != .block { return Verdict(index: i + 1, rule: rule, reason: .blocked, by: block) }
                if let local = first[.mapLocal], rule.kind == .hostOverride { return Verdict(index: i + 1, rule: rule, reason: .answeredLocally, by: local) }
                return Verdict(index: i + 1, rule: rule, reason: .applies)
            }
        }

        func run() async throws {
            let verdicts = Self.verdicts(try SettingsEdit.current(options.paths).settings.rules, url: url)
            if json {
                let J = ExchangeJSON.self
                SettingsJSON.write(J.object([
                    ("url", J.string(url)),
                    ("matches", J.array(verdicts.map { v in
                        J.object([("index", J.number(v.index)), ("name", J.string(v.rule.name)), ("action", J.string(v.rule.actionName)),
                                  ("enabled", J.bool(v.rule.enabled)), ("applies", J.bool(v.reason == .applies)),
                                  ("reason", J.string(v.reason.rawValue)), ("by", J.string(v.by))])
                    })),
                    ("applied", SettingsJSON.strings(verdicts.filter { $0.reason == .applies }.map(\.rule.name))),
                ]))
                return
            }
            for v in verdicts {
                let text: String
                switch v.reason {
                case .applies: text = "applies"
                case .disabled: text = "matches, disabled"
                case .shadowed: text = "matches, shadowed by the earlier \(v.rule.kind.rawValue) rule \"\(v.by ?? "")\""
                case .blocked: text = "matches, not reached: the request is blocked"
                case .answeredLocally: text = "matches, not used: a map_local rule answers"
                }
                print("\(Rules.describe(v.rule)) — \(text)")
            }
            if verdicts.isEmpty { print("no rule matches \(url)") }
        }
    }
}
