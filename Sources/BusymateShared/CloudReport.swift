import Foundation

/// The readiness card's cloud part: the pairing (from the supervisor's
/// private copy) and the sinks (from the tunnel).
public struct CloudReport: Codable, Sendable, Equatable {
    /// "not paired", "paired" or "re-pair required".
    public var state: String
    /// One line: "paired, expires in 364 days", "re-pair required: …".
    public var detail: String
    public var deviceUUID: String?
    public var name: String?
    /// The API's host (never the key).
    public var api: String?
    public var pairedAt: Date?
    public var expiresAt: Date?
    public var expiresInDays: Int?
    /// Within `PairingState.warnDays` of its expiry.
    public var expiringSoon: Bool
    public var sinks: [CloudSinkStatus]

    public init(
        state: String, detail: String, deviceUUID: String? = nil, name: String? = nil, api: String? = nil, pairedAt: Date? = nil,
        expiresAt: Date? = nil, expiresInDays: Int? = nil, expiringSoon: Bool = false, sinks: [CloudSinkStatus] = []
    ) {
        self.state = state
        self.detail = detail
        self.deviceUUID = deviceUUID
        self.name = name
        self.api = api
        self.pairedAt = pairedAt
        self.expiresAt = expiresAt
        self.expiresInDays = expiresInDays
        self.expiringSoon = expiringSoon
        self.sinks = sinks
    }

    /// From the supervisor's own record (it never decodes the token: the
    /// root process parses nothing that came from the network), and what
    /// the tunnel's sinks say.
    public static func make(_ token: DeviceToken?, sinks: [CloudSinkStatus], now: Date = Date()) -> CloudReport {
        guard let token else {
            return CloudReport(state: "not paired", detail: "not paired (busymate pair CODE --api URL --anon-key KEY)", sinks: sinks)
        }
        let days = Int((token.expiresAt.timeIntervalSince(now) / 86_400).rounded(.down))
        var state: PairingState = token.expiresAt > now ? .paired(expiresInDays: days) : .rePairRequired("the token expired")
        if case .paired = state, let refused = sinks.first(where: { $0.sink == "postgrest" && $0.state == .rePairRequired }) {
            state = .rePairRequired(refused.detail ?? "the server refuses the token")
        }
        let name: String
        switch state {
        case .unpaired: name = "not paired"
        case .paired: name = "paired"
        case .rePairRequired: name = "re-pair required"
        }
        return CloudReport(
            state: name, detail: state.description, deviceUUID: token.deviceUUID, name: token.name,
            api: URL(string: token.api)?.host, pairedAt: token.pairedAt, expiresAt: token.expiresAt,
            expiresInDays: max(days, 0), expiringSoon: token.expiresAt > now && days < PairingState.warnDays, sinks: sinks)
    }

    /// Short, for the STATUS= pill (nil when not paired).
    public var pill: String? {
        switch state {
        case "paired": return expiringSoon ? "paired (expires in \(expiresInDays ?? 0) d)" : "paired"
        case "re-pair required": return "re-pair required"
        default: return nil
        }
    }
}
