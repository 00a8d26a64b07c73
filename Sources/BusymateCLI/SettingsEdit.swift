import BusymateShared
import Foundation

/// The CLI's edits of `settings.json`: validated as the tunnel validates
/// the file, keys this version does not know kept, then announced so both
/// processes apply them at once.
enum SettingsEdit {
    /// The settings and the document they were read from (one read).
    static func current(_ paths: GroupPaths) throws -> (settings: AppSettings, root: JSONNode) {
        let data: Data
        do {
            data = try GroupFileReader.read(paths.settings, limit: SettingsFile.sizeLimit)
        } catch {
            throw CLIError(description: error.description)
        }
        let snapshot = SettingsFile.parse(data)
        guard let settings = snapshot.settings, let root = try? JSONParser.parse(Array(data)) else {
            throw CLIError(description: "settings.json is invalid: \(snapshot.error?.description ?? "?")")
        }
        return (settings, root)
    }

    /// Applies `change`. An error in what the edit wrote goes through
    /// `explain`, to name the CLI argument at fault; its line:column would
    /// point into a file nobody wrote. A file already invalid says so.
    static func apply(_ paths: GroupPaths, explain: (SettingsError) -> String? = { _ in nil }, _ change: (inout JSONNode) throws -> Void)
        throws
    {
        do {
            try SettingsFile.edit(paths.settings, change)
        } catch let error as SettingsError {
            if let before = SettingsFile.read(paths.settings).error {
                throw CLIError(description: "\(paths.settings.path) is invalid; fix it first: \(before)")
            }
            throw CLIError(
                description: explain(error) ?? "refused: \(SettingsError(message: error.message, position: nil, keyPath: error.keyPath))")
        }
        if let notifier = try? Notifier(paths: paths, role: "cli") {
            notifier.post(.settingsDidChange)
            notifier.close()
        }
        awaitTunnel(paths)
    }

    /// A command that returns before the tunnel applied the edit lets the
    /// user's next request meet the old settings (`ssl-proxying add HOST`,
    /// then a curl at once, was passed through). Waits until the running
    /// tunnel reports the file's new content in force, at most `timeout`.
    static func awaitTunnel(_ paths: GroupPaths, timeout: Double = 3) {
        let wanted = SettingsFile.read(paths.settings).sha256
        guard !wanted.isEmpty else { return }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let status = TunnelStatus.read(paths.status), status.pid > 0,
                kill(status.pid, 0) == 0 || errno == EPERM
            else { return }
            if status.settingsSha256 == wanted { return }
            usleep(20_000)
        }
        FileHandle.standardError.write(
            Data("note: the tunnel has not applied this yet; it will once it reads settings.json (busymate status)\n".utf8))
    }

    /// Adds `pattern` to the list of strings at `keyPath`; a pattern
    /// already there is refused.
    static func add(_ pattern: String, to keyPath: [String], _ paths: GroupPaths) throws {
        let name = keyPath.joined(separator: ".")
        try apply(paths) { root in
            let current = try strings(in: root, at: keyPath)
            guard !current.contains(pattern) else { throw CLIError(description: "\(pattern) is already in \(name)") }
            SettingsFile.setStrings(current + [pattern], in: &root, at: keyPath)
        }
    }

    static func remove(_ pattern: String, from keyPath: [String], _ paths: GroupPaths) throws {
        let name = keyPath.joined(separator: ".")
        try apply(paths) { root in
            let current = try strings(in: root, at: keyPath)
            guard current.contains(pattern) else { throw CLIError(description: "\(pattern) is not in \(name)") }
            SettingsFile.setStrings(current.filter { $0 != pattern }, in: &root, at: keyPath)
        }
    }

    /// A hand-written value that is no list of strings is not overwritten.
    private static func strings(in root: JSONNode, at keyPath: [String]) throws -> [String] {
        var node: JSONNode? = root
        for (i, key) in keyPath.enumerated() {
            guard let current = node, current.value != .null else { return [] }
            guard case .object = current.value else { throw handWritten(keyPath.prefix(i), "an object") }
            node = current[key]
        }
        switch node?.value {
        case nil, .null?: return []
        case let .array(items)?:
            guard items.allSatisfy({ if case .string = $0.value { return true } else { return false } }) else {
                throw handWritten(keyPath[...], "a list of strings")
            }
            return SettingsFile.strings(in: root, at: keyPath)
        default: throw handWritten(keyPath[...], "a list of strings")
        }
    }

    private static func handWritten(_ keyPath: ArraySlice<String>, _ expected: String) -> CLIError {
        let name = keyPath.isEmpty ? "the document" : "\"\(keyPath.joined(separator: "."))\""
        return CLIError(description: "\(name) in settings.json is not \(expected); fix it by hand first")
    }
}
