import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Curl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print an exchange's request as a runnable curl command.",
        discussion: """
            A text body is quoted in the command; any other body (binary, or bytes a shell argument cannot hold) is written \
            beside it, to busymate-ID.request.bin in the current directory (or --body-dir), and sent with --data-binary @FILE, \
            byte for byte.
            """)
    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id or request id (or the start of one).", completion: Completions.exchangeIDs) var id: String
    @Flag(help: "Send it through Busymate again (--proxy, and --cacert with the group's CA for https).") var proxy = false
    @Option(help: "Where a binary body's file is written.") var bodyDir = "."

    func run() async throws {
        let database = try StoreAccess.open(options.paths)
        let record = try StoreAccess.exchange(id, in: TrafficRepository(database: database))
        guard record.tlsMode != .passthrough, record.method != "CONNECT" else {
            throw CLIError(description: "exchange \(id) is a passed-through tunnel: there is no request to repeat")
        }
        if record.requestBodyTruncated {
            throw CLIError(description: "exchange \(id)'s request body was not stored whole; the command would differ")
        }
        let body = try BodyStore(paths: database.paths).body(of: record, .request)
        var payload: CurlCommandLine.Payload?
        if let body, !body.isEmpty {
            if let text = CurlCommandLine.shellText(body) {
                payload = .text(text)
            } else {
                let file = URL(fileURLWithPath: bodyDir).appendingPathComponent("busymate-\(record.id ?? 0).request.bin")
                try Self.writeNew(body, to: file)
                payload = .file(file.path)
            }
        }
        let through = proxy ? try Resend.proxyAddress(options.paths) : nil
        let command = CurlCommandLine.command(
            for: record, payload: payload,
            proxy: through.map {
                (url: "http://\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)", ca: options.paths.caPEM.path)
            })
        FileHandle.standardOutput.write(Data((command + "\n").utf8))
    }

    /// A new file, 0600 (bodies hold credentials), never through a link
    /// and never over an existing file.
    static func writeNew(_ data: Data, to file: URL) throws {
        let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CLIError(
                description:
                    "cannot create \(file.path): \(String(cString: strerror(errno)))\(errno == EEXIST ? " (remove it, or give --body-dir)" : "")"
            )
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { bytes -> Int in
            var at = 0
            while at < bytes.count {
                let n = write(fd, bytes.baseAddress.map { $0 + at }, bytes.count - at)
                if n < 0 {
                    if errno == EINTR { continue }
                    return -1
                }
                at += n
            }
            return at
        }
        guard written == data.count else { throw CLIError(description: "cannot write \(file.path): \(String(cString: strerror(errno)))") }
    }
}
