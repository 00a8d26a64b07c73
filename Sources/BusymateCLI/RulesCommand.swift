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

    /// Rewrites the `rules` array; `change` gets and returns its JSON nodes.
    static func edit(_ paths: GroupPaths, explain: (SettingsError) -> String? = { _ in nil }, _ change: ([JSONNode]) throws -> [JSONNode])
        throws
    {
        try SettingsEdit.apply(paths, explain: explain) { root in
            var rules: [JSONNode] = []
            switch root["rules"]?.value {
            case let .array(items)?: rules = items
            case nil, .null?: break
            default: throw CLIError(description: "\"rules\" in settings.json is not an array; fix it by hand first")
            }
            root.set("rules", JSONNode(.array(try change(rules))))
        }
    }

    static func index(of name: String, in rules: [JSONNode]) throws -> Int {
        guard let i = rules.firstIndex(where: { if case let .string(n)? = $0["name"]?.value { return n == name } else { return false } })
        else {
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
        return "\(rule.name)\(rule.enabled ? "" : " (disabled)"): \(rule.match.text) → \(what)"
    }

    struct ListRules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the rules, in the order they are evaluated.")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON array: index, name, enabled, action, match and the rule as settings.json holds it.") var json = false
        func run() async throws {
            let (settings, root) = try SettingsEdit.current(options.paths)
            if json {
                // Validated: the document's rules are the settings' rules, in order.
                let nodes: [JSONNode] = { if case let .array(n)? = root["rules"]?.value { return n } else { return [] } }()
                SettingsJSON.write(
                    JSONNode(.array(zip(settings.rules, nodes).enumerated().map { SettingsJSON.rule($1.0, index: $0 + 1, node: $1.1) })))
                return
            }
            if settings.rules.isEmpty { print("no rules") }
            for (i, rule) in settings.rules.enumerated() { print("\(i + 1). \(Rules.describe(rule))") }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a rule by name.")
        @OptionGroup var options: GroupOption
        @Argument(completion: Completions.ruleNames) var name: String
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
        @Argument(completion: Completions.ruleNames) var name: String
        func run() async throws {
            try Rules.setEnabled(true, name, options.paths)
            print("enabled rule \"\(name)\"")
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable a rule by name (it stays in the list).")
        @OptionGroup var options: GroupOption
        @Argument(completion: Completions.ruleNames) var name: String
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
}
