import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

/// The filters `list`, `export` and `tail` share: a filter in mitmproxy's
/// language (README, "Filters"), and the older flags as shorthands for its
/// clauses, and-ed with it.
struct FilterOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("A filter, e.g. '~d example.com & ~c 4xx' or '~b token' (mitmproxy's language; words are joined with spaces).",
                                 valueName: "filter"))
    var expression: [String] = []
    @Option(help: "Host glob, e.g. '*.example.com'.") var host: String?
    @Option(help: "HTTP method.") var method: String?
    @Option(help: "Status: 404, 4xx or 500-599.") var status: String?
    @Option(help: "Only the last span: 30s, 10m, 2h, 1d.") var since: String?
    @Option(help: "Text in the URL or headers.") var search: String?

    func filter(limit: Int) throws -> TrafficRepository.Filter {
        var filter = TrafficRepository.Filter()
        filter.hostGlob = host
        filter.method = method
        filter.search = search
        filter.limit = max(1, limit)
        filter.expression = try parsedExpression()
        // Read as `~c` and `~since` read their values.
        do {
            if let status { filter.status = try CaptureFilter.statusRange(status) }
        } catch {
            throw CLIError(description: "--status: \(error.message)")
        }
        do {
            if let since { filter.since = try CaptureFilter.time(since) }
        } catch {
            throw CLIError(description: "--since: \(error.message)")
        }
        return filter
    }

    /// The filter, or exit status 64 (EX_USAGE) with the position at fault.
    func parsedExpression() throws -> CaptureFilter? {
        let text = expression.joined(separator: " ")
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        do {
            return try CaptureFilter.parse(text)
        } catch {
            FileHandle.standardError.write(Data("busymate: invalid filter \"\(text)\": \(error)\n".utf8))
            throw ExitCode(64)
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List captured exchanges, newest first.")

    @OptionGroup var options: GroupOption
    @OptionGroup var filters: FilterOptions
    @Option(help: "How many.") var limit = 50
    @Option(help: "Only exchanges older than this id (the next page).") var before: Int64?
    @Flag(help: "Print a JSON array.") var json = false

    func run() async throws {
        var filter = try filters.filter(limit: limit)
        filter.before = before
        let records = try TrafficRepository(database: StoreAccess.open(options.paths)).list(filter)
        if json {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            let array: [[String: Any]] = records.map { r in
                [
                    "id": r.id ?? 0, "request_id": r.requestID, "started_at": formatter.string(from: r.startedAt), "method": r.method,
                    "url": r.url, "host": r.host, "status": r.status as Any? ?? NSNull(), "tls": r.tlsMode.rawValue,
                    "duration_ms": r.durationMilliseconds as Any? ?? NSNull(), "error": r.error as Any? ?? NSNull(),
                    "resent_from": r.resentFrom as Any? ?? NSNull(), "rule": r.rule as Any? ?? NSNull(),
                    // Body sizes as they crossed the wire; the content types as declared.
                    "request_size": r.requestBodySize, "response_size": r.responseBodySize,
                    "request_content_type": Self.contentType(r.requestHeaders) as Any? ?? NSNull(),
                    "response_content_type": Self.contentType(r.responseHeaders) as Any? ?? NSNull(),
                ]
            }
            let data = try JSONSerialization.data(withJSONObject: array, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            FileHandle.standardOutput.write(data + Data("\n".utf8))
            return
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss.SSS"
        for r in records {
            let status = r.status.map(String.init) ?? (r.error == nil ? "…" : "ERR")
            let duration = r.durationMilliseconds.map { "\($0)ms" } ?? "-"
            var line = "\(String(r.id ?? 0).padding(toLength: 6, withPad: " ", startingAt: 0)) \(formatter.string(from: r.startedAt)) "
            line += "\(r.method.padding(toLength: 7, withPad: " ", startingAt: 0)) \(status.padding(toLength: 4, withPad: " ", startingAt: 0)) "
            line += "\(duration.padding(toLength: 7, withPad: " ", startingAt: 0)) \(r.tlsMode.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) \(r.url)"
            if let error = r.error { line += "  ! \(error)" }
            print(line)
        }
    }

    static func contentType(_ headers: String?) -> String? {
        ExchangeRecord.decodeHeaders(headers).first { $0.0.caseInsensitiveCompare("content-type") == .orderedSame }?.1
    }
}
