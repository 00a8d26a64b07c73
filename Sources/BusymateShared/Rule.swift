/// One entry of `settings.json`'s `rules` (seed 002's RulesEngine): a URL
/// pattern or a filter, and what to do with the requests it matches. Rules are
/// evaluated in order; the first enabled match of each kind applies.
public struct Rule: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case block, mapLocal = "map_local", mapRemote = "map_remote", hostOverride = "host_override", headers
    }

    public enum Action: Sendable, Equatable {
        /// Answer `status` with a short body, never going upstream.
        case block(status: Int)
        /// Close the client connection without an answer.
        case drop
        /// Serve a file, or a file under a directory root.
        case mapLocal(file: String?, directory: String?)
        /// Send the request to another scheme, host, port or path.
        case mapRemote(to: String)
        /// Dial this address for the matched host (the seed's DNS spoof).
        case hostOverride(address: String)
        case headers(request: HeaderEdits, response: HeaderEdits)
    }

    /// Header changes, in this order: remove, then set (replace or add), then add.
    public struct HeaderEdits: Sendable, Equatable {
        public var remove: [String] = []
        public var set: [(String, String)] = []
        public var add: [(String, String)] = []

        public init() {}

        public var isEmpty: Bool { remove.isEmpty && set.isEmpty && add.isEmpty }

        public static func == (lhs: HeaderEdits, rhs: HeaderEdits) -> Bool {
            lhs.remove == rhs.remove && lhs.set.elementsEqual(rhs.set, by: ==) && lhs.add.elementsEqual(rhs.add, by: ==)
        }
    }

    /// Unique among the rules: what the CLI and the capture row call it.
    public var name: String
    public var enabled: Bool
    public var match: RuleMatch
    public var action: Action

    public init(name: String, enabled: Bool = true, match: RuleMatch, action: Action) {
        self.name = name
        self.enabled = enabled
        self.match = match
        self.action = action
    }

    public var kind: Kind { action.kind }

    /// The action names `settings.json` uses.
    public static let actionNames = ["block", "drop", "map_local", "map_remote", "host_override", "headers"]
}

extension Rule.Action {
    public var kind: Rule.Kind {
        switch self {
        case .block, .drop: return .block
        case .mapLocal: return .mapLocal
        case .mapRemote: return .mapRemote
        case .hostOverride: return .hostOverride
        case .headers: return .headers
        }
    }
}
