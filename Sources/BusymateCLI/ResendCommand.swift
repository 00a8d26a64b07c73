import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation
import ProxyClient

struct Resend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Send an exchange's request again, through the tunnel, as it was or changed; the new exchange links to the old (resent_from).")

    @OptionGroup var options: GroupOption
    @Argument(help: "The exchange's id or request id (or the start of one).", completion: Completions.exchangeIDs) var id: String
    @OptionGroup var changes: RequestChanges

    func run() async throws {
        let paths = options.paths
        let database = try StoreAccess.open(paths)
        let traffic = TrafficRepository(database: database)
        let original = try StoreAccess.exchange(id, in: traffic)
        guard original.tlsMode != .passthrough, original.method != "CONNECT", !original.method.isEmpty else {
            throw CLIError(description: "exchange \(id) has no HTTP request to send again (a tunnel, or a request that never parsed)")
        }
        guard !original.requestBodyTruncated || changes.bodyFile != nil else {
            throw CLIError(description: "exchange \(id)'s request body was not stored whole (give one with --body-file)")
        }
        var request = RequestChanges.Request(original, body: try BodyStore(paths: database.paths).body(of: original, .request) ?? Data())
        try changes.apply(to: &request)
        try await Self.send(request, resentFrom: original, paths: paths, traffic: traffic)
    }

    /// Sends `request` through the tunnel and says which exchange recorded it.
    static func send(_ request: RequestChanges.Request, resentFrom original: ExchangeRecord?, paths: GroupPaths, traffic: TrafficRepository)
        async throws
    {
        let proxy = try proxyAddress(paths)
        let before = try traffic.lastID()
        let record = try request.record(requestID: original?.requestID ?? "")
        let answer = try await ResendClient.send(
            record, body: request.body, resentFrom: original?.requestID, proxy: proxy, trusting: paths.caPEM)
        // The tunnel writes its row within a few tens of milliseconds.
        var stored: ExchangeRecord?
        var since = TrafficRepository.Filter()
        since.limit = 10_000
        for _ in 0..<40 where stored == nil {
            stored = try traffic.stored(after: before, since).records.last { row in
                if let original { return row.resentFrom == original.requestID }
                return row.url == record.url && row.method == record.method
            }
            if stored == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let link = stored.map { "exchange \($0.id ?? 0)" } ?? "a new exchange (not stored yet)"
        let what = original.map { "resent exchange \($0.id ?? 0) as" } ?? "sent"
        FileHandle.standardOutput.write(
            Data(
                "\(what) \(record.method) \(record.url): \(answer.status) \(answer.reason), \(answer.bodyBytes) bytes; recorded as \(link)\n"
                    .utf8))
    }

    static func proxyAddress(_ paths: GroupPaths) throws -> (host: String, port: Int) {
        do {
            return try OutgoingRequest.proxyAddress(paths)
        } catch let error as ProxyClientError {
            throw CLIError(description: error.description)
        }
    }
}

struct Compose: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Send a new request through the tunnel, so it is captured: busymate compose --url URL [--method M] [--header 'N: v'] [--body-file F] [--edit], or --from-curl 'curl …'.",
        discussion:
            "--from-curl takes a curl command as a browser's Copy as cURL gives it; options that say nothing of the request (-s, -L, -o, -x …) are passed over, any other is refused by name. The other options then change what it built."
    )

    @OptionGroup var options: GroupOption
    @Option(help: "Start from this curl command (quoted whole).") var fromCurl: String?
    @OptionGroup var changes: RequestChanges

    func validate() throws {
        if changes.url == nil && !changes.edit && fromCurl == nil {
            throw ValidationError("give the request's --url, a --from-curl command, or write the whole request with --edit")
        }
    }

    func run() async throws {
        let paths = options.paths
        var request = RequestChanges.Request(
            method: "GET", url: changes.url ?? "http://example.com/", headers: [("Accept", "*/*")], body: Data())
        if let fromCurl {
            do {
                request = try CurlImport.parse(fromCurl)
            } catch {
                throw CLIError(description: "--from-curl: \(error.description); nothing was sent")
            }
        }
        let traffic = TrafficRepository(database: try StoreAccess.open(paths))
        try changes.apply(to: &request)
        try await Resend.send(request, resentFrom: nil, paths: paths, traffic: traffic)
    }
}
