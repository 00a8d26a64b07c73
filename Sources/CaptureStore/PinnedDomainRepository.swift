import Foundation
import GRDB

public struct PinnedDomain: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "pinned_domains"
    public var host: String
    public var count: Int
    public var firstSeen: Date
    public var lastSeen: Date
    public var reason: String?

    enum CodingKeys: String, CodingKey {
        case host, count, firstSeen = "first_seen", lastSeen = "last_seen", reason
    }
}

/// Hosts whose clients refused the interception certificate (auto-pinning).
public struct PinnedDomainRepository: Sendable {
    let database: CaptureDatabase

    public init(database: CaptureDatabase) { self.database = database }

    /// Counts one more refusal for `host`.
    public func record(_ host: String, reason: String, at date: Date = Date()) throws {
        try database.pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO pinned_domains (host, count, first_seen, last_seen, reason) VALUES (?, 1, ?, ?, ?)
                    ON CONFLICT(host) DO UPDATE SET count = count + 1, last_seen = excluded.last_seen, reason = excluded.reason
                    """, arguments: [host.lowercased(), date, date, reason])
        }
    }

    /// Counts refusals the tunnel queued, oldest first, in one transaction.
    public func record(_ refusals: [(host: String, reason: String, at: Date)]) async throws {
        try await database.pool.write { db in
            for refusal in refusals {
                try db.execute(
                    sql: """
                        INSERT INTO pinned_domains (host, count, first_seen, last_seen, reason) VALUES (?, 1, ?, ?, ?)
                        ON CONFLICT(host) DO UPDATE SET count = count + 1, last_seen = excluded.last_seen, reason = excluded.reason
                        """, arguments: [refusal.host.lowercased(), refusal.at, refusal.at, refusal.reason])
            }
        }
    }

    public func all() throws -> [PinnedDomain] {
        try database.pool.read { db in try PinnedDomain.order(Column("host")).fetchAll(db) }
    }

    @discardableResult
    public func remove(_ host: String) throws -> Bool {
        try database.pool.write { db in try PinnedDomain.deleteOne(db, key: host.lowercased()) }
    }
}
