import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// Shell completion of what only the store and the settings know: exchange
/// ids (newest first) and rule names. `busymate --generate-completion-script
/// bash|zsh|fish` writes the script; the shell calls back into the CLI.
enum Completions {
    static let exchangeIDs = CompletionKind.custom { words, _, prefix in
        guard let database = try? CaptureDatabase(paths: paths(words), readOnly: true, owner: false) else { return [] }
        var filter = TrafficRepository.Filter()
        filter.limit = 50
        let ids = ((try? TrafficRepository(database: database).list(filter)) ?? []).compactMap(\.id).map(String.init)
        return ids.filter { $0.hasPrefix(prefix) }
    }

    static let ruleNames = CompletionKind.custom { words, _, prefix in
        (SettingsFile.read(paths(words).settings).settings?.rules ?? []).map(\.name).filter { $0.hasPrefix(prefix) }
    }

    /// The group named on the command line so far, or the default one.
    private static func paths(_ words: [String]) -> GroupPaths {
        let explicit =
            words.firstIndex(of: "--group").flatMap { $0 + 1 < words.count ? words[$0 + 1] : nil }
            ?? words.first { $0.hasPrefix("--group=") }.map { String($0.dropFirst("--group=".count)) }
        return GroupPaths.resolve(explicit: explicit)
    }
}
