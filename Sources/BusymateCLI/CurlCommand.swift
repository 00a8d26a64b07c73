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
        if record.requestBodyTruncated { throw CLIError(description: "exchange \(id)'s request body was not stored whole; the command would differ") }
        let body = try BodyStore(paths: database.paths).body(of: record, .request)
        var payload: Payload?
        if let body, !body.isEmpty {
            if let text = Self.shellText(body) {
                payload = .text(text)
            } else {
                let file = URL(fileURLWithPath: bodyDir).appendingPathComponent("busymate-\(record.id ?? 0).request.bin")
                try Self.writeNew(body, to: file)
                payload = .file(file.path)
            }
        }
        let through = proxy ? try Resend.proxyAddress(options.paths) : nil
        let command = Self.command(for: record, payload: payload,
                                   proxy: through.map { (url: "http://\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)", ca: options.paths.caPEM.path) })
        FileHandle.standardOutput.write(Data((command + "\n").utf8))
    }

    enum Payload {
        case text(String)
        case file(String)
    }

    static func command(for record: ExchangeRecord, payload: Payload?, proxy: (url: String, ca: String)? = nil) -> String {
        // -g: brackets and braces in a URL are not curl's globs.
        var parts = ["curl", "-g"]
        if record.method == "HEAD" {
            parts.append("--head")
        } else if record.method != "GET" || payload != nil {
            parts += ["-X", quote(record.method)]
        }
        if record.httpVersion == "HTTP/1.0" { parts.append("--http1.0") }
        parts.append(quote(record.url))
        // Framing and hop-by-hop headers are curl's business.
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "host"]
        let headers = ExchangeRecord.decodeHeaders(record.requestHeaders)
        for (name, value) in headers where !skip.contains(name.lowercased()) {
            // `Name:` would remove the header in curl; `Name;` sends it empty.
            parts += ["-H", quote(value.isEmpty ? "\(name);" : "\(name): \(value)")]
        }
        // The client asked for compressed answers: curl decodes them too.
        let accepted = headers.filter { $0.0.lowercased() == "accept-encoding" }.map { $0.1.lowercased() }.joined(separator: ",")
        if ["gzip", "deflate", "br"].contains(where: { accepted.contains($0) }) {
            parts.append("--compressed")
        }
        switch payload {
        case let .text(text): parts += ["--data-binary", quote(text)]
        case let .file(path): parts += ["--data-binary", quote("@" + path)]
        case nil: break
        }
        if let proxy {
            parts += ["--proxy", quote(proxy.url)]
            if record.scheme == "https" { parts += ["--cacert", quote(proxy.ca)] }
        }
        return parts.joined(separator: " ")
    }

    /// The body as text a single-quoted shell argument carries exactly:
    /// UTF-8 with no NUL and no control character but tab and newlines; nil otherwise.
    static func shellText(_ body: Data) -> String? {
        guard !body.contains(where: { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D) || $0 == 0x7F }),
              let text = String(validating: body, as: UTF8.self), !text.hasPrefix("@") else { return nil }
        return text
    }

    /// A new file, 0600 (bodies hold credentials), never through a link
    /// and never over an existing file.
    static func writeNew(_ data: Data, to file: URL) throws {
        let fd = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CLIError(description: "cannot create \(file.path): \(String(cString: strerror(errno)))\(errno == EEXIST ? " (remove it, or give --body-dir)" : "")")
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { bytes -> Int in
            var at = 0
            while at < bytes.count {
                let n = write(fd, bytes.baseAddress.map { $0 + at }, bytes.count - at)
                if n < 0 { if errno == EINTR { continue }; return -1 }
                at += n
            }
            return at
        }
        guard written == data.count else { throw CLIError(description: "cannot write \(file.path): \(String(cString: strerror(errno)))") }
    }

    /// POSIX shell single quotes.
    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
