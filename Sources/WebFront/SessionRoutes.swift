import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import NIOCore
import NIOPosix

/// Sessions: the filtered list as a HAR file, a HAR file read into the
/// store (marked imported), and clearing the capture.
struct SessionRoutes<Context: RequestContext> {
    let reader: CaptureReader
    let feed: LiveFeed

    /// What one export holds at most (the CLI's `export` default too).
    static var exportLimit: Int { 100_000 }
    static var importLimit: Int { 256 << 20 }

    func register(on router: Router<Context>) {
        router.get("/api/har") { request, _ in
            let query = QueryItems(request.uri.query)
            let limit = max(1, min(Self.exportLimit, query.int("limit") ?? Self.exportLimit))
            let filter: TrafficRepository.Filter
            switch ExchangeRoutes<Context>.filter(query, limit: limit) {
            case let .success(f): filter = f
            case let .failure(failure): return failure.response
            }
            let export = HARExport(reader: reader, filter: filter, redact: query.flag("redact"))
            let ids = try await export.ids()
            let stamp = DatabaseDateText.iso8601(Date()).prefix(19).replacingOccurrences(of: ":", with: "")
            return Response(
                status: .ok,
                headers: [.contentType: "application/json", .contentDisposition: "attachment; filename=\"busymate-\(stamp).har\""],
                body: export.body(ids))
        }
        router.post("/api/har") { request, _ in
            let name = QueryItems(request.uri.query)["name"].map(Self.fileName) ?? "import.har"
            // The file once in memory (each part let go as it is appended); it is then read an entry at a time.
            var data = Data()
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length <= Self.importLimit {
                data.reserveCapacity(length)
            }
            for try await part in request.body {
                guard data.count + part.readableBytes <= Self.importLimit else {
                    return WebJSON.error(.contentTooLarge, "a HAR file of at most \(Self.importLimit >> 20) MiB")
                }
                data.append(contentsOf: part.readableBytesView)
            }
            let paths = reader.paths
            var importer: HARImporter
            do {
                // Scanning a large file is CPU work: off the concurrency pool.
                importer = try await reader.read(writing: true) { [data] repos in
                    let settings = SettingsFile.read(paths.settings).settings ?? AppSettings()
                    return try HARImporter(data, name: name, traffic: repos.traffic, retention: .init(settings))
                }
            } catch let refusal as HARImporter.Refusal {
                return WebJSON.error(.conflict, refusal.description)
            } catch let failure as HARImport.Failure {
                return WebJSON.error(.unprocessableContent, failure.description)
            }
            do {
                while !importer.done {
                    importer = try await reader.read(writing: true) { [importer] repos in
                        var next = importer
                        try next.step(repos.traffic)
                        return next
                    }
                    // The tunnel's writer waits on the store's lock meanwhile: let it in.
                    try await Task.sleep(for: .milliseconds(5))
                }
            } catch {
                let partial = importer
                try? await reader.read(writing: true) { repos in try partial.undo(repos.traffic) }
                switch error {
                case let refusal as HARImporter.Refusal: return WebJSON.error(.conflict, refusal.description)
                case let failure as HARImport.Failure: return WebJSON.error(.unprocessableContent, failure.description)
                default: throw error
                }
            }
            let stored = importer.stored
            await feed.stored()
            return WebJSON.ok([("imported", ExchangeJSON.number(stored)), ("name", ExchangeJSON.string(name))])
        }
        router.delete("/api/exchanges") { request, _ in
            guard let body = try await WebJSON.body(request), case .bool(true)? = body["confirm"]?.value else {
                return WebJSON.error(.badRequest, #"clearing the capture needs {"confirm": true}"#)
            }
            if let refused = WebJSON.unknownKey(body, allowed: ["confirm"], in: "clearing the capture") { return refused }
            let removed = try await reader.read(writing: true) { try $0.traffic.clear() }
            await feed.cleared()
            return WebJSON.ok([("removed", ExchangeJSON.number(removed))])
        }
    }

    /// A HAR file's name as a label: its last path part, printable, short.
    static func fileName(_ text: String) -> String {
        let last = text.split(separator: "/").last.map(String.init) ?? text
        let clean = String(last.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(120).map(Character.init))
        return clean.isEmpty ? "import.har" : clean
    }
}
