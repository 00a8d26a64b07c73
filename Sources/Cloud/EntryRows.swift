import BusymateShared
import CaptureStore
import Foundation

/// Rows of the seed's `entries` table (`request_id, device_uuid, ts, kind,
/// payload`), encoded once and sent as a JSON array. `ts` is the exchange's
/// start as stored (milliseconds), the same on every retry, so the unique
/// key `(request_id, ts)` makes a batch sent twice land once.
public struct EntryRows: Sendable {
    public static let columns = "request_id,device_uuid,ts,kind,payload"
    /// A body larger than this goes as its sizes and type, not its bytes.
    public static let inlineBodyCap = 64 << 10

    public struct Encoded: Sendable {
        public var id: Int64
        public var requestID: String
        public var json: String
    }

    public let deviceUUID: String
    public let bodies: BodyStore

    public init(deviceUUID: String, bodies: BodyStore) {
        self.deviceUUID = deviceUUID
        self.bodies = bodies
    }

    public func encode(_ row: CloudOutbox.Row) -> Encoded {
        let record = row.record
        let kind = record.isDNS ? "dns" : "event"
        var bodyByDirection: [BodyStore.Direction: ExchangeBody] = [:]
        for direction in [BodyStore.Direction.request, .response] {
            // A large body is not read at all: the row's sizes and type say it.
            let size =
                direction == .request
                ? record.requestBodyDecodedSize ?? record.requestBodySize
                : record.responseBodyDecodedSize ?? record.responseBodySize
            guard size <= Self.inlineBodyCap else { continue }
            // A body file that is gone (retention) leaves its sizes.
            bodyByDirection[direction] = try? ExchangeBody(record, direction, bodies: bodies, raw: false)
        }
        // `resent_from` is a local id, meaningless elsewhere: the original's request id says it.
        let payload = ExchangeJSON.object(
            ExchangeJSON.detailMembers(record, resentFrom: nil, bodies: bodyByDirection, breakpoints: [], body: Self.body)
                + [("resent_from_request_id", ExchangeJSON.string(record.resentFrom))])
        let members: [ExchangeJSON.Member] = [
            ("request_id", ExchangeJSON.string(row.requestID)), ("device_uuid", ExchangeJSON.string(deviceUUID)),
            ("ts", ExchangeJSON.string(DatabaseDateText.iso8601(row.startedAt))), ("kind", ExchangeJSON.string(kind)),
            ("payload", payload),
        ]
        return Encoded(id: row.id, requestID: row.requestID, json: JSONWriter.compact(ExchangeJSON.object(members)))
    }

    /// A body's sizes and type, and its bytes when they are small
    /// (a body that grew past the cap as it was decoded: sizes only).
    static func body(_ body: ExchangeBody) -> JSONNode {
        guard (body.shown?.count ?? 0) > inlineBodyCap else { return ExchangeJSON.body(body) }
        var sizesOnly = body
        sizesOnly.shown = nil
        return ExchangeJSON.body(sizesOnly)
    }

    /// The first rows that fit in `maxBytes` (one at least), each encoded
    /// only when the batch still has room for it.
    public static func batch(_ rows: [CloudOutbox.Row], _ encoder: EntryRows, maxBytes: Int) -> (body: String, rows: [Encoded]) {
        var taken: [Encoded] = []
        var size = 2
        for row in rows {
            let encoded = encoder.encode(row)
            let added = encoded.json.utf8.count + (taken.isEmpty ? 0 : 1)
            if !taken.isEmpty && size + added > maxBytes { break }
            taken.append(encoded)
            size += added
        }
        return ("[" + taken.map(\.json).joined(separator: ",") + "]", taken)
    }

    /// A JSON array of the first rows that fit in `maxBytes` (one at least).
    public static func batch(_ rows: [Encoded], maxBytes: Int) -> (body: String, rows: [Encoded]) {
        var taken: [Encoded] = []
        var size = 2
        for row in rows {
            let added = row.json.utf8.count + (taken.isEmpty ? 0 : 1)
            if !taken.isEmpty && size + added > maxBytes { break }
            taken.append(row)
            size += added
        }
        return ("[" + taken.map(\.json).joined(separator: ",") + "]", taken)
    }
}
