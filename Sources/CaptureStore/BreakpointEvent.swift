import Foundation
import GRDB

/// A request or response held at a breakpoint, and how it was resolved: a
/// row of `breakpoint_events`. The CLI asks for a resolution by filling
/// `requested`; the tunnel carries it out and fills `outcome`.
public struct BreakpointEvent: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "breakpoint_events"

    /// A WebSocket message's held row holds its payload (`method`: TEXT or BINARY; `url`: its handshake's).
    public enum Kind: String, Codable, Sendable {
        case request, response
        case messageFromClient = "message_from_client"
        case messageFromServer = "message_from_server"

        public var isMessage: Bool { self == .messageFromClient || self == .messageFromServer }
    }

    /// What was asked for. The first to fill `requested` wins.
    public enum Request: String, Codable, Sendable {
        case `continue`, edit, abort, timeout
    }

    /// What happened to the held message.
    public enum Outcome: String, Codable, Sendable {
        /// Forwarded as held.
        case continued
        /// Forwarded as edited.
        case edited
        /// A request answered with an error; a response's client connection closed.
        case aborted
        /// `breakpoints.timeout_seconds` passed: forwarded as held.
        case timeout
        /// The client went away while the message was held.
        case clientClosed = "client_closed"
        /// The tunnel that held it is gone (stopped, crashed or restarted).
        case abandoned
    }

    public var id: Int64?
    public var kind: Kind
    /// The exchange's `request_id` (its row is written when it completes).
    public var requestID: String
    public var method: String
    public var url: String
    /// The message as held: start line, headers, whole body.
    public var rawHTTPInitial: Data
    public var pausedAt: Date
    /// When `breakpoints.timeout_seconds` sends it on as held; nil: never.
    public var expiresAt: Date?
    /// The tunnel holding it.
    public var tunnelPID: Int32
    public var requested: Request?
    /// An edited message (`requested == .edit`).
    public var rawHTTPRequested: Data?
    public var requestedAt: Date?
    public var resumedAt: Date?
    public var outcome: Outcome?
    /// What was forwarded, when something was.
    public var rawHTTPFinal: Data?

    public init(
        kind: Kind, requestID: String, method: String, url: String, rawHTTPInitial: Data, pausedAt: Date = Date(), expiresAt: Date? = nil,
        tunnelPID: Int32
    ) {
        self.expiresAt = expiresAt
        self.kind = kind
        self.requestID = requestID
        self.method = method
        self.url = url
        self.rawHTTPInitial = rawHTTPInitial
        self.pausedAt = pausedAt
        self.tunnelPID = tunnelPID
    }

    enum CodingKeys: String, CodingKey {
        case id, kind, requestID = "request_id", method, url, rawHTTPInitial = "raw_http_initial", pausedAt = "paused_at", expiresAt =
            "expires_at",
            tunnelPID = "tunnel_pid", requested, rawHTTPRequested = "raw_http_requested", requestedAt = "requested_at",
            resumedAt = "resumed_at", outcome, rawHTTPFinal = "raw_http_final"
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}
