import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Export exchanges as HAR 1.2 (for browsers' DevTools and other tools).")

    @OptionGroup var options: GroupOption
    @OptionGroup var filters: FilterOptions
    @Option(help: "The HAR file to write, or - for standard output.") var har: String
    @Option(help: "At most this many exchanges.") var limit = 100_000
    @Flag(help: "Mask credentials: Authorization, Proxy-Authorization, Cookie, Set-Cookie and API-key headers.") var redact = false
    @Option(help: "The file's mode, in octal (default 600: exports hold cookies and tokens).") var mode = "600"

    func run() async throws {
        let database = try StoreAccess.open(options.paths)
        let records = try TrafficRepository(database: database).list(filters.filter(limit: limit))
        let bodies = BodyStore(paths: database.paths)
        // Oldest first, as a browser records them; tunnels have no HTTP to show.
        guard let fileMode = mode_t(mode, radix: 8), fileMode <= 0o777 else {
            throw CLIError(description: "--mode \(mode) is not an octal file mode such as 600")
        }
        let (data, count) = try HAR.document(records, bodies: bodies, redact: redact, sockets: WebSocketRepository(database: database))
        if har == "-" {
            FileHandle.standardOutput.write(data + Data("\n".utf8))
            FileHandle.standardError.write(Data("wrote \(count) exchanges to standard output\n".utf8))
            return
        }
        try Self.write(data, to: har, mode: fileMode)
        print("wrote \(count) exchanges to \(har)")
    }
}

extension Export {
    /// Created with `mode` from the start (never world-readable for a
    /// moment), replacing a file of ours but not following a symlink.
    static func write(_ data: Data, to path: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw CLIError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        // An existing file keeps its old mode through O_CREAT: set it.
        fchmod(fd, mode)
        do {
            try handle.write(contentsOf: data)
        } catch {
            throw CLIError(description: "cannot write \(path): \(error.localizedDescription)")
        }
    }
}
