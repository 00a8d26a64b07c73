import ArgumentParser
import BusymateShared
import Foundation

/// `breakpoints add|remove|list-patterns`: which URLs are held, edited in
/// `settings.json` as `ssl-proxying` edits its lists.
extension Breakpoints {
    enum Side: String, ExpressibleByArgument, CaseIterable {
        case request, response, messages

        /// The lists a pattern goes to: a WebSocket's messages from one side (`from`), or from both.
        func keyPaths(from: Sender?) -> [[String]] {
            guard self == .messages else { return [["breakpoints", rawValue]] }
            return (from.map { [$0] } ?? Sender.allCases).map { ["breakpoints", "messages_from_\($0.rawValue)"] }
        }
    }

    enum Sender: String, ExpressibleByArgument, CaseIterable { case client, server }

    struct AddPattern: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Hold requests (or responses) that PATTERN matches.")
        @OptionGroup var options: GroupOption
        @Argument(help: "request, response, or messages (a WebSocket's, by its handshake's URL).") var side: Side
        @Argument(
            help: "A URL pattern or a filter, as rules take: api.example.com/v1/*, */graphql, '~m POST & ~d api' (messages: a URL pattern)."
        )
        var pattern: String
        @Option(help: "messages only: hold those the client sends, or the server (default: both).") var from: Sender?
        func validate() throws {
            if from != nil && side != .messages { throw ValidationError("--from picks a WebSocket's side: it goes with messages") }
        }
        func run() async throws {
            switch RuleMatch.parse(breakpoint: pattern, response: side == .response) {
            case let .failure(why):
                throw CLIError(description: "\"\(pattern)\": \(why.position.map { "position \($0): " } ?? "")\(why.message)")
            case let .success(match) where side == .messages && match.isFilter:
                throw CLIError(description: "\"\(pattern)\": messages are held by their socket's URL: give a URL pattern, not a filter")
            case .success:
                break
            }
            // Both of a socket's lists: the one that has it already is left as it is.
            let breakpoints = try SettingsEdit.current(options.paths).settings.breakpoints
            let present: [String: [String]] = [
                "messages_from_client": breakpoints.messagesFromClient.map(\.text),
                "messages_from_server": breakpoints.messagesFromServer.map(\.text),
            ]
            let lists = side.keyPaths(from: from)
            let missing = lists.filter { side != .messages || from != nil || !(present[$0[1]] ?? []).contains(pattern) }
            if missing.isEmpty {
                throw CLIError(description: "\(pattern) is in both breakpoints.messages_from_client and …_from_server already")
            }
            for keyPath in missing {
                try SettingsEdit.add(pattern, to: keyPath, options.paths)
                print("added \(pattern) to \(keyPath.joined(separator: "."))")
            }
        }
    }

    struct RemovePattern: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Stop holding what PATTERN matches.")
        @OptionGroup var options: GroupOption
        @Argument(help: "request, response or messages.") var side: Side
        @Argument(help: "The pattern, as listed.") var pattern: String
        @Option(help: "messages only: from the client's list, or the server's (default: both).") var from: Sender?
        func run() async throws {
            // From both of a socket's lists: wherever it is.
            var missing: [Error] = []
            for keyPath in side.keyPaths(from: from) {
                do {
                    try SettingsEdit.remove(pattern, from: keyPath, options.paths)
                    print("removed \(pattern) from \(keyPath.joined(separator: "."))")
                } catch {
                    missing.append(error)
                }
            }
            if missing.count == side.keyPaths(from: from).count, let first = missing.first { throw first }
        }
    }

    struct ListPatterns: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-patterns", abstract: "Show which requests and responses are held.")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON object: request, response, messages_from_client, messages_from_server, timeout_seconds.") var json = false
        func run() async throws {
            let breakpoints = try SettingsEdit.current(options.paths).settings.breakpoints
            let lists = [
                ("request", breakpoints.request.map(\.text)), ("response", breakpoints.response.map(\.text)),
                ("messages_from_client", breakpoints.messagesFromClient.map(\.text)),
                ("messages_from_server", breakpoints.messagesFromServer.map(\.text)),
            ]
            if json {
                SettingsJSON.write(
                    SettingsJSON.object(
                        lists.map { ($0.0, SettingsJSON.strings($0.1)) }
                            + [("timeout_seconds", SettingsJSON.seconds(breakpoints.timeoutSeconds))]))
                return
            }
            for (name, list) in lists { print("\(name): \(list.isEmpty ? "(none)" : list.joined(separator: " "))") }
            print(
                breakpoints.timeoutSeconds > 0
                    ? "timeout: \(JSONWriter.write(SettingsJSON.seconds(breakpoints.timeoutSeconds)).dropLast())s"
                    : "timeout: never (held until resolved)")
        }
    }
}
