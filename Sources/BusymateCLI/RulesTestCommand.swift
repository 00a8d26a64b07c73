import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

extension Rules {
    struct TestURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "test", abstract: "Show which rules match a request for a URL, and which of them apply.")
        @OptionGroup var options: GroupOption
        @Argument(help: "An absolute URL, e.g. https://api.example.com/v1/users?page=2.") var url: String
        @Option(help: "The request's method, for rules that match with a filter (~m).") var method = "GET"
        @Option(
            name: .customLong("header"),
            help: ArgumentHelp(
                "A request header, for rules that match with a filter (~h, ~t); repeatable.",
                valueName: "NAME: VALUE")) var headers: [String] = []
        @Flag(help: "Test it as an HTTP/2 request (for ~proto h2); HTTP/1.1 otherwise.") var http2 = false
        @Flag(help: "Print a JSON object: the URL, the matching rules with why each applies or not, the names of those that apply.")
        var json = false

        typealias Verdict = RuleVerdict

        func validate() throws {
            guard HTTPToken.isToken(method) else {
                throw ValidationError("--method \"\(method)\" is not a method name (letters and the characters an HTTP token takes)")
            }
            for header in headers where !header.contains(":") {
                throw ValidationError("--header \"\(header)\": write it as \"Name: value\"")
            }
        }

        func run() async throws {
            var exchange = FilterSubject(url: url, method: method.uppercased())
            exchange.httpVersion = http2 ? "HTTP/2.0" : "HTTP/1.1"
            exchange.requestHeaders = headers.map { line in
                let colon = line.firstIndex(of: ":") ?? line.endIndex
                return (
                    String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                    String(line[colon...].dropFirst()).trimmingCharacters(in: .whitespaces)
                )
            }
            let verdicts = RuleVerdict.verdicts(try SettingsEdit.current(options.paths).settings.rules, exchange: exchange)
            if json {
                SettingsJSON.write(RuleVerdict.json(verdicts, url: url, method: method.uppercased()))
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
                case .atResponse: text = "decided when the response comes (its filter may read the response)"
                }
                print("\(Rules.describe(v.rule)) — \(text)")
            }
            if verdicts.isEmpty { print("no rule matches \(url)") }
        }
    }
}
