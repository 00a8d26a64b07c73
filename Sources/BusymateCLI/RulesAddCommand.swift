import ArgumentParser
import BusymateShared
import Foundation

extension Rules {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a rule at the end (or --at N).",
            discussion: """
                With flags: busymate rules add NAME --match 'api.example.com/*' --action block [--status 451]
                (--file, --directory, --to, --address for the other actions). Or whole, as in settings.json:
                busymate rules add --json '{"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}}'
                """)
        @OptionGroup var options: GroupOption
        @Argument(help: "The rule's name (unique).") var name: String?
        @Option(help: "A URL pattern.") var match: String?
        @Option(help: "block, drop, map_local, map_remote, host_override or headers.") var action: String?
        @Option(help: "block: the status to answer (default 403).") var status: Int?
        @Option(help: "map_local: the file to serve (a relative path is taken from the current directory).") var file: String?
        @Option(help: "map_local: the directory to serve from (likewise).") var directory: String?
        @Option(help: "map_remote: the URL to send to.") var to: String?
        @Option(help: "host_override: the IP address to dial.") var address: String?
        @Option(help: "The whole rule as a JSON object, instead of the flags.") var json: String?
        @Option(help: "Put it at this position (1 is first).") var at: Int?
        @Flag(help: "Add it disabled.") var disabled = false

        func run() async throws {
            let node = try ruleNode()
            let ruleName: String? = { if case let .string(n)? = node["name"]?.value { return n } else { return nil } }()
            let position = at
            var inserted = 0
            try Rules.edit(options.paths, explain: { explain($0, index: inserted) }) { rules in
                // Said here: the tunnel's check names whichever comes second.
                if let ruleName, (try? Rules.index(of: ruleName, in: rules)) != nil {
                    throw CLIError(description: "another rule is named \"\(ruleName)\"")
                }
                var rules = rules
                inserted = position.map { min(max($0 - 1, 0), rules.count) } ?? rules.count
                rules.insert(node, at: inserted)
                return rules
            }
            print("added rule \"\(ruleName ?? "?")\"")
        }

        private func ruleNode() throws -> JSONNode {
            if let json {
                guard name == nil, match == nil, action == nil else { throw CLIError(description: "--json takes the whole rule; leave out the name and the flags") }
                do {
                    let node = try JSONParser.parse(json)
                    guard case .object = node.value else { throw CLIError(description: "--json takes a JSON object") }
                    return node
                } catch let error as JSONParser.Error {
                    throw CLIError(description: "--json: \(error.position): \(error.message)")
                }
            }
            guard let name, let match, let action else { throw CLIError(description: "a rule needs a name, --match and --action (or --json)") }
            var members: [(key: String, node: JSONNode)] = [("name", JSONNode(.string(name))), ("match", JSONNode(.string(match))),
                                                            ("action", JSONNode(.string(action)))]
            if disabled { members.append(("enabled", JSONNode(.bool(false)))) }
            if let status { members.append(("status", JSONNode(.number("\(status)")))) }
            if let file { members.append(("file", JSONNode(.string(try Self.existing(file, flag: "--file", directory: false))))) }
            if let directory { members.append(("directory", JSONNode(.string(try Self.existing(directory, flag: "--directory", directory: true))))) }
            for (key, value) in [("to", to), ("address", address)] {
                if let value { members.append((key, JSONNode(.string(value)))) }
            }
            return JSONNode(.object(members))
        }

        /// The absolute path the tunnel needs, of something that is there:
        /// the tunnel runs elsewhere, and would answer 404 for ever.
        static func existing(_ path: String, flag: String, directory: Bool) throws -> String {
            let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory) else {
                throw CLIError(description: "\(flag) \(path): no such \(directory ? "directory" : "file")")
            }
            if isDirectory.boolValue != directory {
                throw CLIError(description: "\(flag) \(path): \(directory ? "not a directory; use --file" : "a directory; use --directory")")
            }
            return absolute
        }

        /// An error in the added rule, told as the argument that gave it.
        private func explain(_ error: SettingsError, index: Int) -> String? {
            let prefix = "rules[\(index)]"
            guard let keyPath = error.keyPath, keyPath == prefix || keyPath.hasPrefix(prefix + ".") else { return nil }
            let key = String(keyPath.dropFirst(prefix.count + 1))
            if json != nil { return "--json: \(key.isEmpty ? "" : "\(key): ")\(error.message)" }
            guard !key.isEmpty else {
                // Rule-wide: "a map_local rule takes either "file" or "directory"" names the flags.
                var message = error.message
                for flag in ["match", "action", "status", "file", "directory", "to", "address"] {
                    message = message.replacingOccurrences(of: "\"\(flag)\"", with: "--\(flag)")
                }
                return message
            }
            return "\(key == "name" ? "the name" : "--\(key)"): \(error.message)"
        }
    }
}
