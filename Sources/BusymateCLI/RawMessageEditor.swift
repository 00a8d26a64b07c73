import BusymateShared
import CaptureStore
import Foundation

/// A held message in the user's editor, and the check an edit must pass
/// before the tunnel gets it (the tunnel checks again).
enum RawMessageEditor {
    /// Opens `raw` in `$VISUAL`, `$EDITOR` or vi; returns what was saved.
    static func edit(_ raw: Data, name: String) throws -> Data {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid()).http")
        try raw.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let environment = ProcessInfo.processInfo.environment
        let editor =
            environment["VISUAL"].flatMap { $0.isEmpty ? nil : $0 } ?? environment["EDITOR"].flatMap { $0.isEmpty ? nil : $0 } ?? "vi"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // As git runs it: the editor may carry arguments.
        process.arguments = ["-c", "\(editor) \"$1\"", editor, file.path]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CLIError(description: "the editor (\(editor)) exited with status \(process.terminationStatus); the message stays held")
        }
        var edited = try Data(contentsOf: file)
        // Editors end the last line; a body that did not end so is kept as it was.
        if raw.last != UInt8(ascii: "\n"), edited.last == UInt8(ascii: "\n"), edited.count > 0 {
            edited.removeLast()
        }
        return edited
    }

    /// Refuses an edit the tunnel could not send, saying where it is wrong.
    static func check(_ edited: Data, replacing event: BreakpointEvent) throws {
        do {
            try HeldMessageResolution.check(edited, replacing: event)
        } catch {
            throw CLIError(description: error.description)
        }
    }
}
