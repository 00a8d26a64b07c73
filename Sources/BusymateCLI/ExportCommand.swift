import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Export exchanges as HAR 1.2 (for browsers' DevTools and other tools).")

    @OptionGroup var options: GroupOption
    @OptionGroup var filters: FilterOptions
    @Option(help: "The HAR file to write.") var har: String
    @Option(help: "At most this many exchanges.") var limit = 100_000

    func run() async throws {
        let records = try TrafficRepository(database: StoreAccess.open(options.paths)).list(filters.filter(limit: limit))
        // Oldest first, as a browser records them; tunnels have no HTTP to show.
        let entries = records.reversed().filter { $0.tlsMode != .passthrough && $0.method != "CONNECT" }.map(HAR.entry)
        let document: [String: Any] = [
            "log": [
                "version": "1.2",
                "creator": ["name": "Busymate", "version": "0.1"],
                "pages": [] as [Any],
                "entries": entries,
            ] as [String: Any],
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        guard FileManager.default.createFile(atPath: har, contents: data) else { throw CLIError(description: "cannot write \(har)") }
        print("wrote \(entries.count) exchanges to \(har)")
    }
}

/// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) entries.
enum HAR {
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func milliseconds(_ from: Date?, _ to: Date?) -> Double {
        guard let from, let to else { return -1 }
        return max(0, (to.timeIntervalSince(from) * 1000 * 1000).rounded() / 1000)
    }

    static func headers(_ text: String?) -> [[String: Any]] {
        ExchangeRecord.decodeHeaders(text).map { ["name": $0.0, "value": $0.1] }
    }

    static func header(_ name: String, in text: String?) -> String? {
        ExchangeRecord.decodeHeaders(text).first { $0.0.lowercased() == name }?.1
    }

    static func queryString(_ url: String) -> [[String: Any]] {
        guard let items = URLComponents(string: url)?.queryItems else { return [] }
        return items.map { ["name": $0.name, "value": $0.value ?? ""] }
    }

    static func entry(_ r: ExchangeRecord) -> [String: Any] {
        var request: [String: Any] = [
            "method": r.method, "url": r.url, "httpVersion": r.httpVersion ?? "HTTP/1.1", "cookies": [] as [Any],
            "headers": headers(r.requestHeaders), "queryString": queryString(r.url), "headersSize": -1, "bodySize": r.requestBodySize,
        ]
        if let body = r.requestBody {
            request["postData"] = ["mimeType": header("content-type", in: r.requestHeaders) ?? "", "text": String(decoding: body, as: UTF8.self)]
        }
        var content: [String: Any] = ["size": r.responseBodySize, "mimeType": header("content-type", in: r.responseHeaders) ?? ""]
        if let body = r.responseBody {
            if let text = String(data: body, encoding: .utf8) {
                content["text"] = text
            } else {
                content["text"] = body.base64EncodedString()
                content["encoding"] = "base64"
            }
        }
        let response: [String: Any] = [
            "status": r.status ?? 0, "statusText": r.reason ?? "", "httpVersion": r.httpVersion ?? "HTTP/1.1", "cookies": [] as [Any],
            "headers": headers(r.responseHeaders), "content": content, "redirectURL": header("location", in: r.responseHeaders) ?? "",
            "headersSize": -1, "bodySize": r.status == nil ? -1 : r.responseBodySize,
        ]
        let connect = milliseconds(r.startedAt, r.connectedAt)
        let wait = milliseconds(r.connectedAt ?? r.startedAt, r.firstByteAt)
        let receive = milliseconds(r.firstByteAt, r.endedAt)
        var entry: [String: Any] = [
            "startedDateTime": timestamp(r.startedAt),
            "time": max(0, milliseconds(r.startedAt, r.endedAt)),
            "request": request, "response": response, "cache": [:] as [String: Any],
            "timings": ["blocked": -1, "dns": -1, "connect": connect, "ssl": -1, "send": 0, "wait": max(0, wait), "receive": max(0, receive)],
            "_requestId": r.requestID,
        ]
        if let server = r.serverAddress { entry["serverIPAddress"] = server.split(separator: ":").dropLast().joined(separator: ":").trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }
        if let error = r.error { entry["_error"] = error }
        return entry
    }
}
