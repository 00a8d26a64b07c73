import ArgumentParser
import BusymateShared
import Foundation

extension Rules {
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a rule at the end (or --at N).",
            discussion: """
                With flags: busymate rules add NAME --match 'api.example.com/*' --action block [--status 451]
                (--file, --directory, --to, --address for the other actions; for headers, --set-header 'Name: value',
                --add-header 'Name: value' and --remove-header Name, on the request unless --on response). Or whole, as in settings.json:
                busymate rules add --json '{"name": "trace", "match": "*/*", "action": "headers", "request": {"add": {"X-Trace": "1"}}}'
                """)
        @OptionGroup var options: GroupOption
        @Argument(help: "The rule's name (unique).") var name: String?
        @Option(help: "A URL pattern (api.example.com/v1/*), or a filter in list's language (~m POST & ~d api).") var match: String?
        @Option(help: "block, drop, map_local, map_remote, host_override or headers.") var action: String?
        @Option(help: "block: the status to answer (default 403).") var status: Int?
        @Option(help: "map_local: the file to serve (a relative path is taken from the current directory).") var file: String?
        @Option(help: "map_local: the directory to serve from (likewise).") var directory: String?
        @Option(help: "map_remote: the URL to send to.") var to: String?
        @Option(help: "host_override: the IP address to dial.") var address: String?
        @Option(
            name: .customLong("set-header"),
            help: ArgumentHelp("headers: replace (or add) this header: 'Name: value'.", valueName: "header"))
        var setHeaders: [String] = []
        @Option(
            name: .customLong("add-header"),
            help: ArgumentHelp("headers: add this header beside any of the name: 'Name: value'.", valueName: "header"))
        var addHeaders: [String] = []
        @Option(name: .customLong("remove-header"), help: ArgumentHelp("headers: remove every header of this name.", valueName: "name"))
        var removeHeaders: [String] = []
        @Option(help: "headers: the message the header flags change: request (default) or response.") var on: HeaderSide?
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
                guard name == nil, match == nil, action == nil else {
                    throw CLIError(description: "--json takes the whole rule; leave out the name and the flags")
                }
                do {
                    let node = try JSONParser.parse(json)
                    guard case .object = node.value else { throw CLIError(description: "--json takes a JSON object") }
                    return node
                } catch let error as JSONParser.Error {
                    throw CLIError(description: "--json: \(error.position): \(error.message)")
                }
            }
            guard let name, let match, let action else {
                throw CLIError(description: "a rule needs a name, --match and --action (or --json)")
            }
            var members: [(key: String, node: JSONNode)] = [
                ("name", JSONNode(.string(name))), ("match", JSONNode(.string(match))),
                ("action", JSONNode(.string(action))),
            ]
            if disabled { members.append(("enabled", JSONNode(.bool(false)))) }
            if let status { members.append(("status", JSONNode(.number("\(status)")))) }
            if let file { members.append(("file", JSONNode(.string(try Self.existing(file, flag: "--file", directory: false))))) }
            if let directory {
                members.append(("directory", JSONNode(.string(try Self.existing(directory, flag: "--directory", directory: true)))))
            }
            for (key, value) in [("to", to), ("address", address)] {
                if let value { members.append((key, JSONNode(.string(value)))) }
            }
            if let edits = try headerEdits() { members.append((on?.rawValue ?? HeaderSide.request.rawValue, edits)) }
            return JSONNode(.object(members))
        }

        enum HeaderSide: String, ExpressibleByArgument, CaseIterable { case request, response }

        /// `--set-header`, `--add-header`, `--remove-header` as the rule's
        /// `{"remove": […], "set": {…}, "add": {…}}`; the tunnel's check then
        /// refuses what a header cannot be.
        private func headerEdits() throws -> JSONNode? {
            if on != nil && setHeaders.isEmpty && addHeaders.isEmpty && removeHeaders.isEmpty {
                throw CLIError(description: "--on: give --set-header, --add-header or --remove-header too")
            }
            func pairs(_ values: [String], flag: String) throws -> [(key: String, node: JSONNode)] {
                var seen: Set<String> = []
                return try values.map { value in
                    guard let colon = value.firstIndex(of: ":") else { throw CLIError(description: "\(flag) \(value): give 'Name: value'") }
                    let name = value[..<colon].trimmingCharacters(in: .whitespaces)
                    guard !name.isEmpty else { throw CLIError(description: "\(flag) \(value): the header has no name") }
                    guard seen.insert(name.lowercased()).inserted else {
                        throw CLIError(description: "\(flag) \(name) twice: one value per name")
                    }
                    return (name, JSONNode(.string(value[value.index(after: colon)...].trimmingCharacters(in: .whitespaces))))
                }
            }
            var edits: [(key: String, node: JSONNode)] = []
            if !removeHeaders.isEmpty { edits.append(("remove", JSONNode(.array(removeHeaders.map { JSONNode(.string($0)) })))) }
            let set = try pairs(setHeaders, flag: "--set-header")
            if !set.isEmpty { edits.append(("set", JSONNode(.object(set)))) }
            let add = try pairs(addHeaders, flag: "--add-header")
            if !add.isEmpty { edits.append(("add", JSONNode(.object(add)))) }
            return edits.isEmpty ? nil : JSONNode(.object(edits))
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
                throw CLIError(
                    description: "\(flag) \(path): \(directory ? "not a directory; use --file" : "a directory; use --directory")")
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
