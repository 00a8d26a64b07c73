import Foundation

/// What the tunnel's cloud sink says of itself in `status.json`, and
/// `busymate cloud status` and the page show.
public struct CloudSinkStatus: Codable, Sendable, Equatable {
    public enum State: String, Codable, Sendable {
        /// Not paired: nothing to send to.
        case off
        /// Caught up, waiting for rows.
        case idle
        case sending
        /// The last attempt failed; the next is at `nextAttemptAt`.
        case backingOff = "backing off"
        /// The server refused the token (401): `busymate pair` again.
        case rePairRequired = "re-pair required"
        /// The server refuses the rows for a reason a retry cannot fix soon (403, 4xx).
        case refused
    }

    public var sink: String
    public var state: State
    /// The host rows go to.
    public var target: String?
    public var detail: String?
    /// Rows sent since the tunnel started, and per second over the last ten seconds.
    public var sentRows: Int
    public var rowsPerSecond: Double
    public var lastPushAt: Date?
    public var lastError: String?
    public var lastErrorAt: Date?
    public var nextAttemptAt: Date?
    public var failures: Int
    /// The largest batch the server takes now (halved on 413).
    public var batchLimit: Int
    /// The cursor: the last row the server has.
    public var sentID: Int64?
    /// Rows not sent yet, and how old the oldest is.
    public var backlog: Int?
    public var lagSeconds: Double?
    /// Rows retention removed before they were sent, and rows the server refused one by one.
    public var droppedUnsent: Int?
    public var rejected: Int?
    /// The account's Realtime link (the `postgrest` sink only): connected, or why not.
    public var realtime: String?

    public init(
        sink: String, state: State, target: String? = nil, detail: String? = nil, sentRows: Int = 0, rowsPerSecond: Double = 0,
        lastPushAt: Date? = nil, lastError: String? = nil, lastErrorAt: Date? = nil, nextAttemptAt: Date? = nil, failures: Int = 0,
        batchLimit: Int = 500, sentID: Int64? = nil, backlog: Int? = nil, lagSeconds: Double? = nil, droppedUnsent: Int? = nil,
        rejected: Int? = nil
    ) {
        self.sink = sink
        self.state = state
        self.target = target
        self.detail = detail
        self.sentRows = sentRows
        self.rowsPerSecond = rowsPerSecond
        self.lastPushAt = lastPushAt
        self.lastError = lastError
        self.lastErrorAt = lastErrorAt
        self.nextAttemptAt = nextAttemptAt
        self.failures = failures
        self.batchLimit = batchLimit
        self.sentID = sentID
        self.backlog = backlog
        self.lagSeconds = lagSeconds
        self.droppedUnsent = droppedUnsent
        self.rejected = rejected
    }
}
