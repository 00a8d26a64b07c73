import CaptureStore
import Foundation
import Hummingbird
import NIOCore

/// `GET /api/har`, streamed in bounded memory: the filter's ids are read by
/// keyset pages first (the slow part, cancelled if the client leaves), then
/// the entries go out oldest first, a chunk at a time, each body read once.
struct HARExport: Sendable {
    let reader: CaptureReader
    let filter: TrafficRepository.Filter
    let redact: Bool

    /// Rows per keyset page, and bytes of entries per write.
    static var page: Int { 500 }
    static var chunkBytes: Int { 1 << 20 }

    /// The ids to export, newest first; `filter.limit` rows at most are
    /// listed (tunnels among them, which are not exported).
    func ids() async throws -> [Int64] {
        var ids: [Int64] = []
        var listed = 0
        var page = filter
        while listed < filter.limit {
            page.limit = min(Self.page, filter.limit - listed)
            let batch = page
            let (kept, count, last) = try await reader.read(lane: .slow) { repos in
                let records = try repos.traffic.list(batch)
                return (records.filter(HAR.isExported).compactMap(\.id), records.count, records.last?.id)
            }
            ids += kept
            listed += count
            guard count == page.limit, let last else { break }
            page.before = last
        }
        return ids
    }

    /// The HAR document over `ids` (newest first), oldest entry first.
    func body(_ ids: [Int64]) -> ResponseBody {
        let reader = reader
        let redact = redact
        return ResponseBody { writer in
            let creator = try JSONSerialization.data(withJSONObject: HAR.creator, options: [.sortedKeys, .withoutEscapingSlashes])
            try await writer.write(
                ByteBuffer(string: #"{"log": {"creator": "# + String(decoding: creator, as: UTF8.self) + #", "entries": ["# + "\n"))
            var end = ids.count
            var first = true
            while end > 0 {
                let (from, opensList) = (end, first)
                let (data, next) = try await reader.read(lane: .slow) { repos -> (Data, Int) in
                    var out = Data()
                    var index = from
                    while index > 0 && out.count < Self.chunkBytes {
                        index -= 1
                        // Removed by retention since: left out.
                        guard let record = try repos.traffic.find(id: ids[index]) else { continue }
                        if !(opensList && out.isEmpty) { out.append(contentsOf: Array(",\n".utf8)) }
                        let entry = HAR.entry(record, bodies: repos.bodies, redact: redact, sockets: repos.sockets)
                        out.append(try JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys, .withoutEscapingSlashes]))
                    }
                    return (out, index)
                }
                if !data.isEmpty {
                    try await writer.write(ByteBuffer(bytes: data))
                    first = false
                }
                end = next
            }
            try await writer.write(ByteBuffer(string: "\n], \"pages\": [], \"version\": \"1.2\"}}\n"))
            try await writer.finish(nil)
        }
    }
}
