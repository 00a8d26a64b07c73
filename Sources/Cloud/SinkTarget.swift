/// Where a sink's rows go: the account's PostgREST, or a team's own PostgreSQL.
public protocol SinkTarget: Sendable {
    /// For status and logs (never a secret).
    var name: String { get }
    /// A JSON array of `entries` rows (`EntryRows.batch`).
    func pushEntries(_ body: String) async -> PushOutcome
    /// The seed's `device_status` row.
    func upsertStatus(deviceUUID: String, online: Bool, vpnState: String) async -> PushOutcome
    /// A target replaced by a new configuration lets its connections go.
    func close() async
}
