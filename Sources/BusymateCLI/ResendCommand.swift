import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Resend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send an exchange's request again, through the tunnel; the new exchange links to the old (resent_from).")

    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id or request id.") var id: String

    /// The header that tells the tunnel which exchange this repeats; the
    /// tunnel records it as `resent_from` and does not forward it.
    static let header = "X-Busymate-Resent-From"

    func run() async throws {
        let paths = options.paths
        let database = try StoreAccess.open(paths)
        let traffic = TrafficRepository(database: database)
        guard let record = try Int64(id).flatMap({ try traffic.find(id: $0) }) ?? traffic.find(requestID: id) else {
            throw CLIError(description: "no exchange \(id)")
        }
        guard record.tlsMode != .passthrough, record.method != "CONNECT", !record.method.isEmpty else {
            throw CLIError(description: "exchange \(id) has no HTTP request to send again (a tunnel, or a request that never parsed)")
        }
        guard !record.requestBodyTruncated else { throw CLIError(description: "exchange \(id)'s request body was not stored whole") }
        let body = try BodyStore(paths: database.paths).body(of: record, .request) ?? Data()
        let proxy = try Self.proxyAddress(paths)
        let sentAt = Date()
        let answer = try await ResendClient.send(record, body: body, proxy: proxy, trusting: paths.caPEM)
        // The tunnel writes its row within a few tens of milliseconds.
        var resent: ExchangeRecord?
        for _ in 0..<40 where resent == nil {
            resent = try traffic.list(.init()).first { $0.resentFrom == record.requestID && $0.startedAt >= sentAt.addingTimeInterval(-1) }
            if resent == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let link = resent.map { "exchange \($0.id ?? 0)" } ?? "a new exchange (not stored yet)"
        print("resent \(record.method) \(record.url): \(answer.status) \(answer.reason), \(answer.bodyBytes) bytes; recorded as \(link)")
    }

    /// Where the tunnel listens, from its status file (the bound address: the
    /// settings may say port 0); a wildcard address is reached on loopback.
    static func proxyAddress(_ paths: GroupPaths) throws -> (host: String, port: Int) {
        guard let status = TunnelStatus.read(paths.status), ProcessProbe.isAlive(status.pid),
              let bound = status.listeners.compactMap(\.bound).first else {
            throw CLIError(description: "the tunnel is not running (see `busymate status`)")
        }
        guard let colon = bound.lastIndex(of: ":"), let port = Int(bound[bound.index(after: colon)...]) else {
            throw CLIError(description: "cannot read the listener address \(bound)")
        }
        var host = String(bound[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        return (host, port)
    }
}
