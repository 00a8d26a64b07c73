import ArgumentParser
import BusymateShared
import Foundation

struct SSLProxying: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssl-proxying",
        abstract:
            "The hosts whose HTTPS is intercepted, and those whose upstream certificate is not verified (settings.json, applied live).",
        subcommands: [Add.self, Remove.self, ListPatterns.self, TrustUpstream.self])

    /// Which list an edit goes to.
    struct Which: ParsableArguments {
        @Flag(help: "Edit the exclude list instead of the include list.") var exclude = false
        @Flag(help: "Edit the list of hosts whose upstream certificate is not verified.") var insecureUpstream = false
        var path: [String] { ["ssl_proxying", insecureUpstream ? "insecure_upstream" : exclude ? "exclude" : "include"] }

        func validate() throws {
            if exclude && insecureUpstream { throw ValidationError("--exclude and --insecure-upstream name different lists; give one") }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a host pattern: api.example.com, *.example.com or *.")
        @OptionGroup var options: GroupOption
        @OptionGroup var which: Which
        @Argument var pattern: String
        func run() async throws {
            if let problem = SSLProxyMatcher.problem(with: pattern) { throw CLIError(description: "\"\(pattern)\": \(problem)") }
            try SettingsEdit.add(pattern, to: which.path, options.paths)
            print("added \(pattern) to \(which.path.joined(separator: "."))")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a host pattern.")
        @OptionGroup var options: GroupOption
        @OptionGroup var which: Which
        @Argument var pattern: String
        func run() async throws {
            try SettingsEdit.remove(pattern, from: which.path, options.paths)
            print("removed \(pattern) from \(which.path.joined(separator: "."))")
        }
    }

    struct ListPatterns: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show the three lists.")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON object.") var json = false
        func run() async throws {
            let settings = try SettingsEdit.current(options.paths).settings
            let lists = [
                ("include", settings.sslInclude), ("exclude", settings.sslExclude), ("insecure_upstream", settings.insecureUpstream),
            ]
            if json {
                SettingsJSON.write(SettingsJSON.object(lists.map { ($0.0, SettingsJSON.strings($0.1)) }))
                return
            }
            for (name, list) in lists { print("\(name): \(list.isEmpty ? "(none)" : list.joined(separator: " "))") }
        }
    }
}
