import Foundation
import GRDB

/// A HAR file read into the store a chunk at a time: each chunk its own
/// short transaction (capture commits between them), one entry parsed at a
/// time. Imported rows count against retention like captured ones, but an
/// import never makes retention remove what is stored: a file with more
/// entries (or body bytes) than the store has room for is refused, saying
/// how many fit, and nothing of it is kept.
public struct HARImporter: Sendable {
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    private let data: Data
    private let entries: [Range<Int>]
    public let name: String
    /// Body bytes the store can take (`capture.max_bytes` less what it holds).
    private let byteRoom: Int
    private var next = 0
    private var bytes = 0
    /// The ids of the rows stored so far, to take back on a failure.
    private var ids: ClosedRange<Int64>?

    public static let chunk = 1_000

    public var count: Int { entries.count }
    public var stored: Int { next }
    public var done: Bool { next >= entries.count }

    /// Finds the entries and checks they fit (blocks: a scan of `data` and one of the store).
    public init(_ data: Data, name: String, traffic: TrafficRepository, retention: TrafficRepository.Retention) throws {
        self.data = data
        self.name = name
        entries = try HAREntryScanner.entries(in: data)
        let size = try traffic.size()
        let room = max(0, retention.maxExchanges - size.exchanges)
        guard entries.count <= room else {
            throw Refusal(
                description: """
                    this file has \(entries.count) entries and the store has room for \(room) more (capture.max_exchanges is \
                    \(retention.maxExchanges), \(size.exchanges) stored): importing it would remove captured exchanges. \
                    Clear the capture or raise capture.max_exchanges
                    """)
        }
        byteRoom = max(0, retention.maxBytes - size.bytes)
    }

    /// Parses and stores the next chunk, in one transaction (blocks).
    public mutating func step(_ traffic: TrafficRepository) throws {
        let end = min(entries.count, next + Self.chunk)
        let parsed = try (next..<end).map { i in try HARImport.entry(data, entries[i], number: i + 1, name: name) }
        let records = parsed.map(\.record)
        let sockets = parsed.flatMap(\.sockets)
        bytes +=
            records.reduce(0) { $0 + $1.storedBytes }
            + sockets.reduce(0) { total, event in
                if case let .messages(list) = event { return total + list.reduce(0) { $0 + $1.stored } }
                return total
            }
        guard bytes <= byteRoom else {
            throw Refusal(
                description: """
                    the bodies of this file's entries are more than the \(byteRoom) bytes the store has room for (capture.max_bytes less \
                    what is stored): importing it would remove captured exchanges. Clear the capture or raise capture.max_bytes
                    """)
        }
        let inserted = try traffic.insert(records, sockets: sockets).compactMap(\.id)
        if let first = inserted.min(), let last = inserted.max() {
            ids = min(ids?.lowerBound ?? first, first)...max(ids?.upperBound ?? last, last)
        }
        next = end
    }

    /// Takes back what was stored of a file that failed half way (blocks).
    public func undo(_ traffic: TrafficRepository) throws {
        guard let ids else { return }
        try traffic.database.pool.write { db in
            try db.execute(
                sql: "DELETE FROM exchanges WHERE id BETWEEN ? AND ? AND imported = ?", arguments: [ids.lowerBound, ids.upperBound, name])
        }
    }
}
