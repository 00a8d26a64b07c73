import ArgumentParser
import BusymateShared
import Foundation

/// `breakpoints add|remove|list-patterns`: which URLs are held, edited in
/// `settings.json` as `ssl-proxying` edits its lists.
extension Breakpoints {
    enum Side: String, ExpressibleByArgument, CaseIterable {
        case request, response
        var keyPath: [String] { ["breakpoints", rawValue] }
    }

    struct AddPattern: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Hold requests (or responses) that PATTERN matches.")
        @OptionGroup var options: GroupOption
        @Argument(help: "request or response.") var side: Side
        @Argument(help: "A URL pattern or a filter, as rules take: api.example.com/v1/*, */graphql, '~m POST & ~d api'.") var pattern: String
        func run() async throws {
            if case let .failure(why) = RuleMatch.parse(breakpoint: pattern, response: side == .response) {
                throw CLIError(description: "\"\(pattern)\": \(why.position.map { "position \($0): " } ?? "")\(why.message)")
            }
            try SettingsEdit.add(pattern, to: side.keyPath, options.paths)
            print("added \(pattern) to \(side.keyPath.joined(separator: "."))")
        }
    }

    struct RemovePattern: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Stop holding what PATTERN matches.")
        @OptionGroup var options: GroupOption
        @Argument(help: "request or response.") var side: Side
        @Argument(help: "The pattern, as listed.") var pattern: String
        func run() async throws {
            try SettingsEdit.remove(pattern, from: side.keyPath, options.paths)
            print("removed \(pattern) from \(side.keyPath.joined(separator: "."))")
        }
    }

    struct ListPatterns: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list-patterns", abstract: "Show which requests and responses are held.")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON object: request, response, timeout_seconds.") var json = false
        func run() async throws {
            let breakpoints = try SettingsEdit.current(options.paths).settings.breakpoints
            let lists = [("request", breakpoints.request.map(\.text)), ("response", breakpoints.response.map(\.text))]
            if json {
                SettingsJSON.write(SettingsJSON.object(lists.map { ($0.0, SettingsJSON.strings($0.1)) }
                    + [("timeout_seconds", SettingsJSON.seconds(breakpoints.timeoutSeconds))]))
                return
            }
            for (name, list) in lists { print("\(name): \(list.isEmpty ? "(none)" : list.joined(separator: " "))") }
            print(breakpoints.timeoutSeconds > 0 ? "timeout: \(JSONWriter.write(SettingsJSON.seconds(breakpoints.timeoutSeconds)).dropLast())s"
                                                 : "timeout: never (held until resolved)")
        }
    }
}
