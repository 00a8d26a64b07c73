import ArgumentParser
import BusymateShared
import Foundation

struct Tail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Follow live activity.")

    @OptionGroup var options: GroupOption
    @Flag(name: .long, help: "Show notifications between the processes as they arrive.") var events = false

    func run() async throws {
        guard events else {
            throw CLIError(description: "capture tailing comes with the capture store; use `busymate tail --events` for notifications")
        }
        // Signals first: once the socket exists, a stop must remove it.
        let interrupts = SignalStream.make([SIGINT, SIGTERM])
        let notifier: Notifier
        do {
            notifier = try Notifier(paths: options.paths, role: "cli")
        } catch {
            throw CLIError(description: "cannot listen in \(options.paths.notifyDirectory.path): \(error)")
        }
        Task {
            for await _ in interrupts {
                notifier.close()
                Foundation.exit(0)
            }
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for await note in notifier.notifications() {
            // Unbuffered, so a pipe sees each line as it happens.
            FileHandle.standardOutput.write(Data("\(formatter.string(from: Date())) \(note.name.rawValue) from \(note.sender)\(note.payload.map { " \($0)" } ?? "")\n".utf8))
        }
    }
}
