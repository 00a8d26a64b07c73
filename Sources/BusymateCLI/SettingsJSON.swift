import BusymateShared
import CaptureStore
import Foundation

/// The JSON of the settings and store read commands (docs/usage.md, "JSON
/// output"), built key by key as `ExchangeJSON` builds exchanges.
enum SettingsJSON {
    typealias J = ExchangeJSON

    static func write(_ node: JSONNode) { J.write(node) }
    static func object(_ members: [J.Member]) -> JSONNode { J.object(members) }
    static func strings(_ list: [String]) -> JSONNode { J.array(list.map { J.string($0) }) }

    /// A number as settings.json would hold it: `60`, not `60.0`.
    static func seconds(_ value: Double) -> JSONNode {
        JSONNode(.number(value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)))
    }

    /// A `rules list --json` entry: where it stands, and the rule as written.
    static func rule(_ rule: Rule, index: Int, node: JSONNode) -> JSONNode {
        J.object([
            ("index", J.number(index)), ("name", J.string(rule.name)), ("enabled", J.bool(rule.enabled)),
            ("action", J.string(rule.actionName)), ("match", J.string(rule.match.text)), ("rule", node),
        ])
    }

    /// A pin, and when it ends: `ssl_proxying.pin_ttl` after its last refusal.
    static func pin(_ pin: PinnedDomain, ttl: Double) -> JSONNode {
        let expires = pin.lastSeen.addingTimeInterval(ttl)
        return J.object([
            ("host", J.string(pin.host)), ("count", J.number(pin.count)), ("first_seen", J.date(pin.firstSeen)),
            ("last_seen", J.date(pin.lastSeen)), ("expires_at", J.date(expires)), ("active", J.bool(expires > Date())),
            ("reason", J.string(pin.reason)),
        ])
    }

    /// A breakpoint event (`breakpoints list --json`, `show --json` adds the raw messages).
    static func breakpointMembers(_ event: BreakpointEvent) -> [J.Member] {
        [
            ("id", J.number(event.id)), ("kind", J.string(event.kind.rawValue)), ("request_id", J.string(event.requestID)),
            ("method", J.string(event.method)), ("url", J.string(event.url)), ("paused_at", J.date(event.pausedAt)),
            ("expires_at", J.date(event.expiresAt)),
            ("requested", J.string(event.requested?.rawValue)), ("resumed_at", J.date(event.resumedAt)),
            ("outcome", J.string(event.outcome?.rawValue)), ("tunnel_pid", J.number(event.tunnelPID)),
        ]
    }
}
