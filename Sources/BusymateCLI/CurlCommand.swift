import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Curl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print an exchange's request as a runnable curl command.")
    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id or request id.") var id: String

    func run() async throws {
        let traffic = TrafficRepository(database: try StoreAccess.open(options.paths))
        guard let record = try Int64(id).flatMap({ try traffic.find(id: $0) }) ?? traffic.find(requestID: id) else {
            throw CLIError(description: "no exchange \(id)")
        }
        guard record.tlsMode != .passthrough else { throw CLIError(description: "exchange \(id) is a passed-through tunnel: there is no request to repeat") }
        if record.requestBodyTruncated { throw CLIError(description: "exchange \(id)'s request body was not stored whole; the command would differ") }
        print(Self.command(for: record))
    }

    static func command(for record: ExchangeRecord) -> String {
        var parts = ["curl"]
        if record.method != "GET" || record.requestBody != nil { parts += ["-X", quote(record.method)] }
        parts.append(quote(record.url))
        // Framing and hop-by-hop headers are curl's business.
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "host"]
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) where !skip.contains(name.lowercased()) {
            parts += ["-H", quote("\(name): \(value)")]
        }
        if let body = record.requestBody {
            parts += ["--data-binary", quote(String(decoding: body, as: UTF8.self))]
        }
        return parts.joined(separator: " ")
    }

    /// POSIX shell single quotes.
    static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
