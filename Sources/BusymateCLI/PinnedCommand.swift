import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Pinned: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Hosts passed through because their clients refused the interception certificate.",
        subcommands: [ListPins.self, Remove.self])

    struct ListPins: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List pinned hosts.")
        @OptionGroup var options: GroupOption
        @Flag(help: "Print a JSON array: host, count, first_seen, last_seen, expires_at, active, reason.") var json = false
        func run() async throws {
            let pins = try PinnedDomainRepository(database: StoreAccess.open(options.paths)).all()
            let ttl = SettingsFile.read(options.paths.settings).settings?.pinTTL ?? AppSettings().pinTTL
            if json {
                SettingsJSON.write(JSONNode(.array(pins.map { SettingsJSON.pin($0, ttl: ttl) })))
                return
            }
            for pin in pins {
                let expires = pin.lastSeen.addingTimeInterval(ttl)
                let state =
                    expires > Date()
                    ? "until \(DatabaseDateText.iso8601(expires))" : "expired \(DatabaseDateText.iso8601(expires)): intercepted again"
                print(
                    "\(pin.host)  \(pin.count)×  first \(DatabaseDateText.iso8601(pin.firstSeen))  last \(DatabaseDateText.iso8601(pin.lastSeen))  \(state)\(pin.reason.map { "  (\($0))" } ?? "")"
                )
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Intercept HOST again.")
        @OptionGroup var options: GroupOption
        @Argument var host: String
        func run() async throws {
            guard try PinnedDomainRepository(database: StoreAccess.open(options.paths, readOnly: false)).remove(host) else {
                throw CLIError(description: "\(host) is not pinned")
            }
            // The tunnel reloads its pins when settings are said to change.
            if let notifier = try? Notifier(paths: options.paths, role: "cli") {
                notifier.post(.settingsDidChange)
                notifier.close()
            }
            print("\(host) is no longer pinned")
        }
    }
}
