import BusymateShared
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// A row of a team database's `entries`, as `list --remote` shows it.
public struct RemoteEntry: Sendable {
    public var requestID: String
    public var deviceUUID: String
    public var ts: Date
    public var kind: String
    /// The exchange as `show --json` has it (JSON text).
    public var payload: String
}

/// `entries` in a team's PostgreSQL, read with the filter language: the
/// reading side of the team database the sinks write.
public struct RemoteEntries: Sendable {
    public let address: TeamDatabase.Address
    /// How long PostgreSQL may take (a regular expression over many rows).
    public var statementTimeout: Int = 30

    public init(address: TeamDatabase.Address) { self.address = address }

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The newest rows `filter` keeps, at most `limit`, newest first.
    public func list(_ filter: CaptureFilter?, limit: Int) async throws(Failure) -> [RemoteEntry] {
        let logger = Logger(label: "busymate.cloud.remote")
        let compiled = PostgresFilter(filter)
        var binds = PostgresBindings()
        let connection: PostgresConnection
        do {
            for parameter in compiled.parameters { try binds.append(parameter) }
            try binds.append(max(1, limit))
            connection = try await TeamDatabaseConnection.connect(
                address, on: MultiThreadedEventLoopGroup.singleton.any(), id: 1, logger: logger)
        } catch {
            throw Failure(description: "cannot reach \(address.redacted): \(Self.describe(error))")
        }
        do {
            try await connection.query("SELECT set_config('statement_timeout', \("\(statementTimeout)s"), false)", logger: logger)
            let query = PostgresQuery(
                unsafeSQL: """
                    SELECT request_id, device_uuid::text, ts, kind, payload::text FROM entries
                    WHERE \(compiled.sql) ORDER BY ts DESC, request_id DESC LIMIT $\(compiled.parameters.count + 1)::int
                    """, binds: binds)
            var entries: [RemoteEntry] = []
            let rows = try await connection.query(query, logger: logger)
            for try await (requestID, device, ts, kind, payload) in rows.decode((String, String, Date, String, String).self) {
                entries.append(RemoteEntry(requestID: requestID, deviceUUID: device, ts: ts, kind: kind, payload: payload))
            }
            try? await connection.close()
            return entries
        } catch {
            try? await connection.close()
            throw Failure(description: "\(address.redacted): \(Self.describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if error.code == .server, let state = error.serverInfo?[.sqlState] {
                return "PostgreSQL \(state): \(CloudCallResult.printable(error.serverInfo?[.message] ?? "?"))"
            }
            return "PostgreSQL: \(error.code)"
        }
        return CloudError.describe(error)
    }
}
