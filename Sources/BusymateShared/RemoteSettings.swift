/// The account's effective settings (`effective_settings_for_device`)
/// merged into `settings.json`: the server wins on the keys it sends,
/// objects merge key by key, every other key is kept. The seed's own
/// names are read as this appliance's; a null means "inherit" and
/// changes nothing; keys neither knows are left out and named.
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
        let known = AppSettings.knownKeys[""] ?? []
        for (key, node) in members {
            if node.value == .null { continue }
            if known.contains(key) {
                let before = root[key]
                var merged = before ?? JSONNode(.null)
                overlay(node, onto: &merged)
                if before?.value != merged.value {
                    root.set(key, merged)
                    merge.changed.append(contentsOf: differences(before, merged, path: key))
                }
            } else if let path = aliases[key] {
                guard case let .array(items) = node.value else {
                    throw Invalid(description: "\"\(key)\" in the effective settings is \(node.value.typeName), not a list")
                }
                folded[path, default: []].append(contentsOf: items)
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

    /// Objects merge key by key; anything else is replaced.
    private static func overlay(_ node: JSONNode, onto target: inout JSONNode) {
        guard case let .object(members) = node.value, case .object = target.value else {
            target = node
            return
        }
        for (key, value) in members {
            if value.value == .null { continue }
            var current = target[key] ?? JSONNode(.null)
            overlay(value, onto: &current)
            target.set(key, current)
        }
    }

    private static func differences(_ before: JSONNode?, _ after: JSONNode, path: String) -> [String] {
        guard case let .object(members) = after.value, case .object? = before?.value else { return [path] }
        return members.flatMap { key, node -> [String] in
            before?[key]?.value == node.value ? [] : differences(before?[key], node, path: "\(path).\(key)")
        }
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
