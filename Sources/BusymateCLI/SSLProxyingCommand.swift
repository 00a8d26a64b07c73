import ArgumentParser
import BusymateShared
import Foundation

struct SSLProxying: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssl-proxying",
        abstract: "The hosts whose HTTPS is intercepted (settings.json, applied live).",
        subcommands: [Add.self, Remove.self, ListPatterns.self])

    /// Which list an edit goes to.
    struct Which: ParsableArguments {
        @Flag(help: "Edit the exclude list instead of the include list.") var exclude = false
        var path: [String] { ["ssl_proxying", exclude ? "exclude" : "include"] }
    }

    static func edit(_ paths: GroupPaths, _ change: @escaping ([String]) throws -> [String], at keyPath: [String]) throws {
        do {
            try SettingsFile.edit(paths.settings) { root in
                SettingsFile.setStrings(try change(SettingsFile.strings(in: root, at: keyPath)), in: &root, at: keyPath)
            }
        } catch let error as SettingsError {
            throw CLIError(description: "\(paths.settings.path): \(error)")
        }
        if let notifier = try? Notifier(paths: paths, role: "cli") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a host pattern: api.example.com, *.example.com or *.")
        @OptionGroup var options: GroupOption
        @OptionGroup var which: Which
        @Argument var pattern: String
        func run() async throws {
            if let problem = SSLProxyMatcher.problem(with: pattern) { throw CLIError(description: "\"\(pattern)\": \(problem)") }
            try SSLProxying.edit(options.paths, { $0.contains(pattern) ? $0 : $0 + [pattern] }, at: which.path)
            print("added \(pattern) to \(which.path.joined(separator: "."))")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a host pattern.")
        @OptionGroup var options: GroupOption
        @OptionGroup var which: Which
        @Argument var pattern: String
        func run() async throws {
            let pattern = self.pattern
            let list = which.path.joined(separator: ".")
            try SSLProxying.edit(options.paths, { current in
                guard current.contains(pattern) else { throw CLIError(description: "\(pattern) is not in \(list)") }
                return current.filter { $0 != pattern }
            }, at: which.path)
            print("removed \(pattern) from \(list)")
        }
    }

    struct ListPatterns: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "Show both lists.")
        @OptionGroup var options: GroupOption
        func run() async throws {
            let snapshot = SettingsFile.read(options.paths.settings)
            guard let settings = snapshot.settings else {
                throw CLIError(description: "settings.json is invalid: \(snapshot.error?.description ?? "?")")
            }
            print("include: \(settings.sslInclude.isEmpty ? "(none)" : settings.sslInclude.joined(separator: " "))")
            print("exclude: \(settings.sslExclude.isEmpty ? "(none)" : settings.sslExclude.joined(separator: " "))")
        }
    }
}
