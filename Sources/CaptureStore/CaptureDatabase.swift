import BusymateShared
import Foundation
import GRDB

/// The capture store: `capture.sqlite` in the group directory, WAL mode,
/// shared by the tunnel (writer) and the CLI, supervisor and web (readers).
public final class CaptureDatabase: Sendable {
    public let pool: DatabasePool
    public let paths: GroupPaths

    public struct Refusal: Error, CustomStringConvertible {
        public var description: String
    }

    /// `owner` is the tunnel, which creates the store: it alone migrates the
    /// schema and sets the files' modes. Everyone else (the CLI, as root or
    /// not) only reads or writes rows, and nobody opens a store file that is
    /// a symbolic link a group member could have planted.
    public init(paths: GroupPaths, readOnly: Bool = false, owner: Bool? = nil) throws {
        self.paths = paths
        let owner = owner ?? !readOnly
        for suffix in ["", "-wal", "-shm"] {
            var st = stat()
            if lstat(paths.captureDatabase.path + suffix, &st) == 0, st.st_mode & S_IFMT != S_IFREG {
                throw Refusal(
                    description: "\(paths.captureDatabase.path + suffix) is not a regular file (a symbolic link?); refusing to open it")
            }
        }
        var config = Configuration()
        // Several processes share the file: wait for a lock rather than fail.
        config.busyMode = .timeout(5)
        config.readonly = readOnly
        let bodies = BodyStore(paths: paths)
        config.prepareDatabase { db in
            FilterFunctions.register(in: db, bodies: bodies)
            if !db.configuration.readonly {
                // New stores only (an existing file keeps its size): fewer,
                // fuller pages per batch; 12 % more inserts a second, measured.
                try db.execute(sql: "PRAGMA page_size = 16384")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // A 16 MB WAL between checkpoints (SQLite's default is 4 MB): the
                // pages at each index's end change in every commit, and a
                // checkpoint copies each page once however often it changed.
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \((16 << 20) / max(pageSize, 512))")
                try db.execute(sql: "PRAGMA journal_size_limit = \(32 << 20)")
            }
        }
        pool = try DatabasePool(path: paths.captureDatabase.path, configuration: config)
        if owner && !readOnly {
            try Self.migrator.migrate(pool)
            // Readers need write access to -shm too: group-writable files.
            // Only files this process owns, and never through a link. By
            // path, not by opening them: closing any descriptor of the
            // database drops this process's POSIX locks on it, and SQLite
            // in another process then took itself for the last connection
            // and deleted the WAL under the tunnel.
            for suffix in ["", "-wal", "-shm"] {
                let path = paths.captureDatabase.path + suffix
                var st = stat()
                guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid() else { continue }
                chmod(path, 0o660)
            }
        }
    }

    /// At a clean stop: every committed row into `capture.sqlite` and the
    /// WAL emptied, so the one file is the whole capture (a user shares it
    /// by copying it). A truncating checkpoint holds other writers back
    /// while it waits for readers: at a hand-over the next tunnel already
    /// writes, so this waits one second at most, then leaves the WAL to it.
    public func checkpointAndTruncate() async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA busy_timeout = 1000")
            defer { try? db.execute(sql: "PRAGMA busy_timeout = 5000") }
            try db.checkpoint(.truncate)
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "exchanges") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("request_id", .text).notNull().unique()
                t.column("started_at", .datetime).notNull()
                t.column("connected_at", .datetime)
                t.column("tls_done_at", .datetime)
                t.column("first_byte_at", .datetime)
                t.column("ended_at", .datetime)
                t.column("client_address", .text)
                t.column("server_address", .text)
                t.column("scheme", .text).notNull()
                t.column("method", .text).notNull()
                t.column("host", .text).notNull()
                t.column("port", .integer).notNull()
                t.column("path", .text).notNull()
                t.column("url", .text).notNull()
                t.column("http_version", .text)
                t.column("status", .integer)
                t.column("reason", .text)
                t.column("request_headers", .text).notNull().defaults(to: "[]")
                t.column("response_headers", .text)
                t.column("request_body_size", .integer).notNull().defaults(to: 0)
                t.column("response_body_size", .integer).notNull().defaults(to: 0)
                t.column("request_body", .blob)
                t.column("response_body", .blob)
                t.column("request_body_truncated", .boolean).notNull().defaults(to: false)
                t.column("response_body_truncated", .boolean).notNull().defaults(to: false)
                t.column("tls_mode", .text).notNull()
                t.column("sni", .text)
                t.column("tls_version", .text)
                t.column("tls_cipher", .text)
                t.column("error", .text)
                t.column("bytes_up", .integer)
                t.column("bytes_down", .integer)
                t.column("resent_from", .text)
            }
            // The CLI's queries: newest first, by host, by status.
            try db.create(index: "exchanges_started", on: "exchanges", columns: ["started_at"])
            try db.create(index: "exchanges_host", on: "exchanges", columns: ["host", "started_at"])
            try db.create(index: "exchanges_status", on: "exchanges", columns: ["status", "started_at"])
            try db.create(table: "pinned_domains") { t in
                t.primaryKey("host", .text)
                t.column("count", .integer).notNull().defaults(to: 1)
                t.column("first_seen", .datetime).notNull()
                t.column("last_seen", .datetime).notNull()
                t.column("reason", .text)
            }
        }
        migrator.registerMigration("v2: body files, decoded sizes") { db in
            try db.alter(table: "exchanges") { t in
                t.add(column: "request_body_file", .text)
                t.add(column: "response_body_file", .text)
                t.add(column: "request_body_decoded_size", .integer)
                t.add(column: "response_body_decoded_size", .integer)
                t.add(column: "stored_bytes", .integer).notNull().defaults(to: 0)
            }
            try db.execute(sql: "UPDATE exchanges SET stored_bytes = ifnull(length(request_body), 0) + ifnull(length(response_body), 0)")
        }
        // Every insert paid for these two, and `list` is faster without
        // them: a filter walks `started_at` newest first and stops at a page
        // (SQLite chose these indexes and sorted every match: 280 ms for
        // `--status 404` over 1M rows, 25 ms now). A filter that matches
        // almost nothing scans the store: about 0.3 s per million rows.
        migrator.registerMigration("v3: capture pays for one time index only") { db in
            try db.drop(index: "exchanges_host")
            try db.drop(index: "exchanges_status")
        }
        migrator.registerMigration("v4: the rules that applied") { db in
            try db.alter(table: "exchanges") { t in t.add(column: "rule", .text) }
        }
        migrator.registerMigration("v5: breakpoint events") { db in
            try db.create(table: "breakpoint_events") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("kind", .text).notNull()
                t.column("request_id", .text).notNull()
                t.column("method", .text).notNull()
                t.column("url", .text).notNull()
                t.column("raw_http_initial", .blob).notNull()
                t.column("paused_at", .datetime).notNull()
                t.column("tunnel_pid", .integer).notNull()
                t.column("requested", .text)
                t.column("raw_http_requested", .blob)
                t.column("requested_at", .datetime)
                t.column("resumed_at", .datetime)
                t.column("outcome", .text)
                t.column("raw_http_final", .blob)
            }
            try db.create(index: "breakpoint_events_request", on: "breakpoint_events", columns: ["request_id"])
        }
        // A filter on hosts that finds few rows walked the whole time index
        // (0.6–1 s over 1M rows). `HostIndex` says how rows by host are kept.
        migrator.registerMigration("v6: hosts, and rows by host") { db in
            try db.create(table: "hosts", options: .withoutRowID) { t in t.primaryKey("host", .text) }
            try db.create(table: "host_rows", options: .withoutRowID) { t in
                t.column("host", .text).notNull()
                t.column("started_at", .datetime).notNull()
                t.column("id", .integer).notNull()
                t.primaryKey(["host", "started_at", "id"])
            }
            try db.create(table: "marks", options: .withoutRowID) { t in
                t.primaryKey("name", .text)
                t.column("value", .integer).notNull()
            }
            // Filled by the writer, a bounded chunk per commit: a big store is
            // not indexed here, before the tunnel may say it is ready.
        }
        // Exchanges read from a HAR file (the web page's import), by its name.
        migrator.registerMigration("v7: imported exchanges") { db in
            try db.alter(table: "exchanges") { t in t.add(column: "imported", .text) }
        }
        // Devices on the network: who sent it and how it arrived. No index:
        // capture pays for the time index only (v3); `~device` scans.
        migrator.registerMigration("v8: devices and front ends") { db in
            try db.alter(table: "exchanges") { t in
                t.add(column: "device", .text)
                t.add(column: "front_end", .text)
            }
        }
        // A user's marks and comments (`busymate mark`, the page), as
        // mitmproxy's; `~marked`, `~marker` and `~comment` scan. And
        // Busymate's own notes on a row that did not fail.
        migrator.registerMigration("v9: marks, comments and notes") { db in
            try db.alter(table: "exchanges") { t in
                t.add(column: "marker", .text)
                t.add(column: "comment", .text)
                t.add(column: "note", .text)
            }
        }
        // When a held message goes on by itself (nil: held until resolved), for the page's countdown.
        migrator.registerMigration("v10: breakpoint deadlines") { db in
            try db.alter(table: "breakpoint_events") { t in t.add(column: "expires_at", .datetime) }
        }
        // HTTP/2: the stream an exchange was, the client connection it came
        // on (the page groups a connection's streams), and trailers both ways
        // (`[[name, value], …]` as headers; NULL when there were none).
        // Rows before this have NULL: HTTP/1, or not known.
        migrator.registerMigration("v11: streams, connections and trailers") { db in
            try db.alter(table: "exchanges") { t in
                t.add(column: "stream_id", .integer)
                t.add(column: "connection_id", .text)
                t.add(column: "request_trailers", .text)
                t.add(column: "response_trailers", .text)
            }
        }
        // The cloud sink's outbox: how far each sink has sent (`CloudOutbox`).
        migrator.registerMigration("v12: cloud cursors") { db in
            try db.create(table: "cloud_cursors") { t in
                t.primaryKey("sink", .text)
                t.column("account", .text)
                t.column("sent_id", .integer).notNull()
                t.column("sent_rows", .integer).notNull().defaults(to: 0)
                t.column("sent_at", .datetime)
                t.column("dropped_unsent", .integer).notNull().defaults(to: 0)
                t.column("rejected", .integer).notNull().defaults(to: 0)
                t.column("started_at", .datetime).notNull()
            }
        }
        // WebSockets: the socket a `101` opened (one row per handshake) and
        // its messages, both gone with their exchange. Messages are read by
        // socket in order, or all of them after an id (`tail --messages`).
        migrator.registerMigration("v13: websocket messages") { db in
            try db.create(table: "websockets") { t in
                t.primaryKey("exchange_id", .integer).references("exchanges", onDelete: .cascade)
                t.column("opened_at", .datetime).notNull()
                t.column("closed_at", .datetime)
                t.column("tunnel_pid", .integer).notNull()
                t.column("extensions", .text)
                t.column("messages_up", .integer).notNull().defaults(to: 0)
                t.column("messages_down", .integer).notNull().defaults(to: 0)
                t.column("pings", .integer).notNull().defaults(to: 0)
                t.column("pongs", .integer).notNull().defaults(to: 0)
                t.column("close_code", .integer)
                t.column("close_reason", .text)
                t.column("closed_by", .text)
                t.column("file", .text).notNull()
            }
            try db.create(table: "ws_messages") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("exchange_id", .integer).notNull().references("exchanges", onDelete: .cascade)
                t.column("seq", .integer).notNull()
                t.column("at", .datetime).notNull()
                t.column("from_client", .boolean).notNull()
                t.column("opcode", .integer).notNull()
                t.column("length", .integer).notNull()
                t.column("wire_length", .integer).notNull()
                t.column("frames", .integer).notNull().defaults(to: 1)
                t.column("compressed", .boolean).notNull().defaults(to: false)
                t.column("payload", .blob)
                t.column("payload_file", .text)
                t.column("payload_offset", .integer)
                t.column("stored", .integer).notNull().defaults(to: 0)
                t.column("truncated", .boolean).notNull().defaults(to: false)
                t.column("origin", .text).notNull().defaults(to: "relayed")
            }
            try db.create(index: "ws_messages_socket", on: "ws_messages", columns: ["exchange_id", "seq"])
        }
        // Messages a person asked to send into an open socket (`busymate ws
        // send`, the page's composer): claimed by the tunnel that carries
        // the socket, then sent (as message `seq`) or refused (`error`).
        migrator.registerMigration("v14: websocket sends") { db in
            try db.create(table: "ws_sends") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("exchange_id", .integer).notNull().references("exchanges", onDelete: .cascade)
                t.column("to_client", .boolean).notNull()
                t.column("opcode", .integer).notNull()
                t.column("payload", .blob).notNull()
                t.column("requested_at", .datetime).notNull()
                t.column("claimed_by", .integer)
                t.column("sent_at", .datetime)
                t.column("seq", .integer)
                t.column("error", .text)
            }
            try db.create(index: "ws_sends_socket", on: "ws_sends", columns: ["exchange_id"])
        }
        // The order sockets closed in, for the page's live feed: closing times
        // are the tunnel's clock (and an abandoned one's is back-dated), and a
        // count of closed sockets falls as retention trims them.
        migrator.registerMigration("v15: websocket close order") { db in
            try db.alter(table: "websockets") { t in t.add(column: "close_order", .integer) }
            try db.create(index: "websockets_close_order", on: "websockets", columns: ["close_order"])
        }
        return migrator
    }
}
