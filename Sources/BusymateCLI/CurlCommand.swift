import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Curl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print an exchange's request as a runnable curl command.")
    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id or request id.") var id: String

    func run() async throws {
        let database = try StoreAccess.open(options.paths)
        let traffic = TrafficRepository(database: database)
        guard let record = try Int64(id).flatMap({ try traffic.find(id: $0) }) ?? traffic.find(requestID: id) else {
            throw CLIError(description: "no exchange \(id)")
        }
        guard record.tlsMode != .passthrough else { throw CLIError(description: "exchange \(id) is a passed-through tunnel: there is no request to repeat") }
        if record.requestBodyTruncated { throw CLIError(description: "exchange \(id)'s request body was not stored whole; the command would differ") }
        let body = try BodyStore(paths: database.paths).body(of: record, .request)
        print(Self.command(for: record, body: body))
    }

    static func command(for record: ExchangeRecord, body: Data?) -> String {
        var parts = ["curl"]
        if record.method != "GET" || body != nil { parts += ["-X", quote(record.method)] }
        parts.append(quote(record.url))
        // Framing and hop-by-hop headers are curl's business.
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "host"]
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) where !skip.contains(name.lowercased()) {
            parts += ["-H", quote("\(name): \(value)")]
        }
        if let body {
            parts += ["--data-binary", quote(String(decoding: body, as: UTF8.self))]
        }
        return parts.joined(separator: " ")
    }

    /// POSIX shell single quotes.
    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
