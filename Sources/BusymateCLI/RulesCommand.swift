import ArgumentParser
import BusymateShared
import Foundation

/// `busymate rules`: edits `settings.json`'s rules (the tunnel applies them
/// live) and shows which would match a URL. Every edit is validated as the
/// tunnel validates the file, and keys the CLI does not know are kept.
struct Rules: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The rules: block, drop, map_local, map_remote, host_override, headers (settings.json, applied live).",
        subcommands: [ListRules.self, Add.self, Remove.self, Enable.self, Disable.self, TestURL.self])

    static func settings(_ paths: GroupPaths) throws -> AppSettings {
        let snapshot = SettingsFile.read(paths.settings)
        guard let settings = snapshot.settings else { throw CLIError(description: "settings.json is invalid: \(snapshot.error?.description ?? "?")") }
        return settings
    }

    /// Rewrites the `rules` array; `change` gets and returns its JSON nodes.
    static func edit(_ paths: GroupPaths, _ change: @escaping ([JSONNode]) throws -> [JSONNode]) throws {
        do {
            try SettingsFile.edit(paths.settings) { root in
                var rules: [JSONNode] = []
                switch root["rules"]?.value {
                case let .array(items)?: rules = items
                case nil, .null?: break
                default: throw CLIError(description: "\"rules\" in settings.json is not an array; fix it by hand first")
                }
                root.set("rules", JSONNode(.array(try change(rules))))
            }
        } catch let error as SettingsError {
            throw CLIError(description: "\(paths.settings.path): \(error)")
        }
        if let notifier = try? Notifier(paths: paths, role: "cli") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
    }

    static func index(of name: String, in rules: [JSONNode]) throws -> Int {
        guard let i = rules.firstIndex(where: { if case let .string(n)? = $0["name"]?.value { return n == name } else { return false } }) else {
            throw CLIError(description: "no rule is named \"\(name)\"")
        }
        return i
    }

    static func describe(_ rule: Rule) -> String {
        let what: String
        switch rule.action {
        case let .block(status): what = "block \(status)"
        case .drop: what = "drop"
        case let .mapLocal(file, directory): what = "map_local \(file ?? directory ?? "")"
        case let .mapRemote(to): what = "map_remote → \(to)"
        case let .hostOverride(address): what = "host_override → \(address)"
        case let .headers(request, response):
            func count(_ e: Rule.HeaderEdits) -> Int { e.remove.count + e.set.count + e.add.count }
            what = "headers (\(count(request)) request, \(count(response)) response edits)"
        }
        return "\(rule.name)\(rule.enabled ? "" : " (disabled)"): \(rule.pattern.text) → \(what)"
    }

    struct ListRules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the rules, in the order they are evaluated.")
        @OptionGroup var options: GroupOption
        func run() async throws {
            let rules = try Rules.settings(options.paths).rules
            if rules.isEmpty { print("no rules") }
            for (i, rule) in rules.enumerated() { print("\(i + 1). \(Rules.describe(rule))") }
        }
    }

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
        @Option(help: "map_local: the file to serve.") var file: String?
        @Option(help: "map_local: the directory to serve from.") var directory: String?
        @Option(help: "map_remote: the URL to send to.") var to: String?
        @Option(help: "host_override: the IP address to dial.") var address: String?
        @Option(help: "The whole rule as a JSON object, instead of the flags.") var json: String?
        @Option(help: "Put it at this position (1 is first).") var at: Int?
        @Flag(help: "Add it disabled.") var disabled = false

        func run() async throws {
            let node = try ruleNode()
            let position = at
            try Rules.edit(options.paths) { rules in
                var rules = rules
                let index = position.map { min(max($0 - 1, 0), rules.count) } ?? rules.count
                rules.insert(node, at: index)
                return rules
            }
            let name: String = { if case let .string(n)? = node["name"]?.value { return n } else { return "?" } }()
            print("added rule \"\(name)\"")
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
            for (key, value) in [("file", file), ("directory", directory), ("to", to), ("address", address)] {
                if let value { members.append((key, JSONNode(.string(value)))) }
            }
            return JSONNode(.object(members))
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a rule by name.")
        @OptionGroup var options: GroupOption
        @Argument var name: String
        func run() async throws {
            let name = self.name
            try Rules.edit(options.paths) { rules in
                var rules = rules
                rules.remove(at: try Rules.index(of: name, in: rules))
                return rules
            }
            print("removed rule \"\(name)\"")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a rule by name.")
        @OptionGroup var options: GroupOption
        @Argument var name: String
        func run() async throws {
            try Rules.setEnabled(true, name, options.paths)
            print("enabled rule \"\(name)\"")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a rule by name (it stays in the list).")
        @OptionGroup var options: GroupOption
        @Argument var name: String
        func run() async throws {
            try Rules.setEnabled(false, name, options.paths)
            print("disabled rule \"\(name)\"")
        }
    }

    static func setEnabled(_ enabled: Bool, _ name: String, _ paths: GroupPaths) throws {
        try edit(paths) { rules in
            var rules = rules
            let i = try index(of: name, in: rules)
            rules[i].set("enabled", JSONNode(.bool(enabled)))
            return rules
        }
    }

    struct TestURL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Show which rules match a URL, and which of them apply.")
        @OptionGroup var options: GroupOption
        @Argument(help: "An absolute URL, e.g. https://api.example.com/v1/users?page=2.") var url: String
        func run() async throws {
            let matching = try Rules.settings(options.paths).rules.filter { $0.pattern.matches(url) }
            // As the tunnel decides: the first enabled match of each kind; a
            // block ends it; a local answer is never dialled.
            var first: [Rule.Kind: String] = [:]
            for rule in matching where rule.enabled && first[rule.kind] == nil { first[rule.kind] = rule.name }
            let blocked = first[.block] != nil
            let local = first[.mapLocal] != nil
            for rule in matching {
                let verdict: String
                if !rule.enabled {
                    verdict = "matches, disabled"
                } else if first[rule.kind] != rule.name {
                    verdict = "matches, shadowed by the earlier \(rule.kind.rawValue) rule \"\(first[rule.kind] ?? "")\""
                } else if blocked && rule.kind != .block {
                    verdict = "matches, not reached: the request is blocked"
                } else if local && rule.kind == .hostOverride {
                    verdict = "matches, not used: a map_local rule answers"
                } else {
                    verdict = "applies"
                }
                print("\(Rules.describe(rule)) — \(verdict)")
            }
            let any = !matching.isEmpty
            if !any { print("no rule matches \(url)") }
        }
    }
}
