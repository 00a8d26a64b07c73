/// The account's effective settings (`effective_settings_for_device`)
/// merged into `settings.json`: the server wins on the keys it sends,
/// every other key is kept. Only what the iOS app takes from the account
/// may change: which hosts are decrypted and which messages are held.
/// Listeners, access, the upstream, trust, the mode and the rest stay
/// the appliance's own (an account that could set them could open the
/// proxy to the network or route it elsewhere); they are named as left
/// out. The seed's names are read as this appliance's; a null means
/// "inherit" and changes nothing.
public enum RemoteSettings {
    public struct Merge: Sendable, Equatable {
        /// Key paths whose value changed, e.g. `ssl_proxying.include`.
        public var changed: [String] = []
        /// Keys of the server's this appliance has no setting for.
        public var ignored: [String] = []
        public init() {}
    }

    /// The seed's keys (the iOS app's names) and where they live here.
    /// `breakpoint_patterns` is the legacy request list, folded into the
    /// request patterns as the seed does.
    public static let aliases: [String: [String]] = [
        "ssl_proxy_domains": ["ssl_proxying", "include"],
        "breakpoint_request_patterns": ["breakpoints", "request"],
        "breakpoint_patterns": ["breakpoints", "request"],
        "breakpoint_response_patterns": ["breakpoints", "response"],
    ]

    /// This appliance's own names the account may set, as key paths.
    public static let allowed: Set<[String]> = [
        ["ssl_proxying", "include"], ["ssl_proxying", "exclude"],
        ["breakpoints", "request"], ["breakpoints", "response"], ["breakpoints", "timeout_seconds"],
    ]

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public static func merge(_ effective: JSONNode, into root: inout JSONNode) throws(Invalid) -> Merge {
        guard case let .object(members) = effective.value else {
            throw Invalid(description: "the effective settings are \(effective.value.typeName), not an object")
        }
        guard case .object = root.value else { throw Invalid(description: "settings.json is not an object") }
        var merge = Merge()
        var folded: [[String]: [JSONNode]] = [:]
        for (key, node) in members {
            if node.value == .null { continue }
            if let path = aliases[key] {
                guard case let .array(items) = node.value else {
                    throw Invalid(description: "\"\(key)\" in the effective settings is \(node.value.typeName), not a list")
                }
                folded[path, default: []].append(contentsOf: items)
            } else if case let .object(inner) = node.value, allowed.contains(where: { $0.first == key }) {
                for (name, value) in inner where value.value != .null {
                    let path = [key, name]
                    guard allowed.contains(path) else {
                        merge.ignored.append(path.joined(separator: "."))
                        continue
                    }
                    if self.value(at: path, in: root)?.value != value.value {
                        set(value, at: path, in: &root)
                        merge.changed.append(path.joined(separator: "."))
                    }
                }
            } else {
                merge.ignored.append(key)
            }
        }
        for (path, items) in folded.sorted(by: { $0.key.joined() < $1.key.joined() }) {
            var unique: [JSONNode] = []
            for item in items where !unique.contains(item) { unique.append(item) }
            let before = value(at: path, in: root)
            if before?.value != .array(unique) {
                set(JSONNode(.array(unique)), at: path, in: &root)
                merge.changed.append(path.joined(separator: "."))
            }
        }
        return merge
    }

    private static func value(at path: [String], in root: JSONNode) -> JSONNode? {
        var node: JSONNode? = root
        for key in path { node = node?[key] }
        return node
    }

    private static func set(_ value: JSONNode, at path: [String], in node: inout JSONNode) {
        guard let key = path.first else {
            node = value
            return
        }
        if case .object = node.value {} else { node = JSONNode(.object([])) }
        var child = node[key] ?? JSONNode(.object([]))
        set(value, at: Array(path.dropFirst()), in: &child)
        node.set(key, child)
    }
}
