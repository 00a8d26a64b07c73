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
            return Response(status: .ok, headers: [.contentType: "application/json", .contentDisposition: "attachment; filename=\"busymate-\(stamp).har\""],
                            body: export.body(ids))
        }
        router.post("/api/har") { request, _ in
            let name = QueryItems(request.uri.query)["name"].map(Self.fileName) ?? "import.har"
            let buffer: ByteBuffer
            do {
                buffer = try await request.body.collect(upTo: Self.importLimit)
            } catch {
                return WebJSON.error(.contentTooLarge, "a HAR file of at most \(Self.importLimit >> 20) MiB")
            }
            let records: [ExchangeRecord]
            do {
                // Parsing a large file is CPU work: off the concurrency pool.
                records = try await NIOThreadPool.singleton.runIfActive { try HARImport.records(Data(buffer.readableBytesView), name: name) }
            } catch {
                return WebJSON.error(.unprocessableContent, "\(error)")
            }
            // Oldest first, so the newest imported is the newest id.
            let sorted = records.sorted { $0.startedAt < $1.startedAt }
            let stored = try await reader.read(writing: true) { repos in
                try stride(from: 0, to: sorted.count, by: 1_000).reduce(0) { count, start in
                    count + (try repos.traffic.insert(Array(sorted[start..<min(sorted.count, start + 1_000)])).count)
                }
            }
            await feed.stored()
            return WebJSON.ok([("imported", ExchangeJSON.number(stored)), ("name", ExchangeJSON.string(name))])
        }
        router.delete("/api/exchanges") { request, _ in
            guard let body = try await WebJSON.body(request), case .bool(true)? = body["confirm"]?.value else {
                return WebJSON.error(.badRequest, #"clearing the capture needs {"confirm": true}"#)
            }
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
