import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// A team's own PostgreSQL, the same `entries` table the account's cloud
/// has: each batch is one statement (`jsonb_to_recordset` over the batch's
/// JSON, `ON CONFLICT DO NOTHING`), on one connection kept open and made
/// again when it breaks.
public actor PostgresTarget: SinkTarget {
    public nonisolated let name: String
    private let address: TeamDatabase.Address
    private let eventLoop: any EventLoop
    private let logger = Logger(label: "busymate.cloud")
    private var connection: PostgresConnection?
    /// One connection attempt at a time: two callers (a batch, a stop's
    /// report) share it, and no connection is made only to be dropped.
    private var connecting: Task<PostgresConnection, any Error>?
    private var connectionID = 0

    public init(address: TeamDatabase.Address, eventLoop: any EventLoop) {
        self.address = address
        self.eventLoop = eventLoop
        name = address.redacted
    }

    public func pushEntries(_ body: String) async -> PushOutcome {
        await run(
            """
            INSERT INTO entries (request_id, device_uuid, ts, kind, payload)
            SELECT request_id, device_uuid, ts, kind, payload
            FROM jsonb_to_recordset(\(body)::jsonb) AS x(request_id text, device_uuid uuid, ts timestamptz, kind text, payload jsonb)
            ON CONFLICT (request_id, ts) DO NOTHING
            """)
    }

    public func upsertStatus(deviceUUID: String, online: Bool, vpnState: String) async -> PushOutcome {
        await run(
            """
            INSERT INTO device_status (device_uuid, online, last_heartbeat_at, vpn_state, source)
            VALUES (\(deviceUUID)::uuid, \(online), now(), \(vpnState), 'tunnel')
            ON CONFLICT (device_uuid) DO UPDATE SET online = excluded.online, last_heartbeat_at = excluded.last_heartbeat_at,
              vpn_state = excluded.vpn_state, source = excluded.source
            """)
    }

    public func close() async {
        // Taken out before the await: a connection made meanwhile is not dropped unclosed.
        let closing = connection
        connection = nil
        try? await closing?.close()
    }

    private func run(_ query: PostgresQuery) async -> PushOutcome {
        do {
            let connection = try await connected()
            try await connection.query(query, logger: logger)
            return .accepted
        } catch let error as PSQLError {
            let outcome = Self.outcome(error)
            if case .retry = outcome { await close() }
            return outcome
        } catch {
            await close()
            return .retry(CloudError.describe(error), after: nil)
        }
    }

    private func connected() async throws -> PostgresConnection {
        if let stale = connection {
            if !stale.isClosed { return stale }
            // Closed by the server (a terminated backend): closed here too
            // before it goes, as postgres-nio requires of every connection.
            // Taken out first: another caller may set a new one meanwhile.
            connection = nil
            try? await stale.close()
        }
        if let connecting { return try await connecting.value }
        let address = address
        let eventLoop = eventLoop
        let logger = logger
        connectionID += 1
        let id = connectionID
        let attempt = Task { () async throws -> PostgresConnection in
            try await TeamDatabaseConnection.connect(address, on: eventLoop, id: id, logger: logger)
        }
        connecting = attempt
        defer { connecting = nil }
        let made = try await attempt.value
        connection = made
        return made
    }

    /// SQLSTATE classes: a connection or a resource problem passes (retry);
    /// a refused password or a table that does not fit does not (refused).
    static func outcome(_ error: PSQLError) -> PushOutcome {
        guard error.code == .server, let state = error.serverInfo?[.sqlState] else {
            return .retry("PostgreSQL: \(error.code)", after: nil)
        }
        let message = error.serverInfo?[.message].map { ": \(CloudCallResult.printable($0))" } ?? ""
        let said = "PostgreSQL \(state)\(message)"
        switch state.prefix(2) {
        case "08", "53", "57", "40", "55", "58", "XX": return .retry(said, after: nil)
        case "22", "23": return .rowRejected(said)
        // A refused role or password (28) is fixed by a new URL, which starts the sink anew.
        default: return .refused(said)
        }
    }
}
