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

        typealias Verdict = RuleVerdict

        func run() async throws {
            let verdicts = RuleVerdict.verdicts(try SettingsEdit.current(options.paths).settings.rules, url: url)
            if json {
                SettingsJSON.write(RuleVerdict.json(verdicts, url: url))
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
