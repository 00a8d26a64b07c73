/// A JSON document that keeps key order, duplicate-free objects and, for
/// every value, where it stood in the source, so that a settings error can
/// name its line and column and a rewrite keeps keys nobody here knows.
public indirect enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONNode])
    case object([(key: String, node: JSONNode)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a.map(\.value) == b.map(\.value)
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.node.value == $1.node.value }
        default: return false
        }
    }

    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

public struct SourcePosition: Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public var description: String { "\(line):\(column)" }
}

public struct JSONNode: Sendable, Equatable {
    public var value: JSONValue
    public var position: SourcePosition
    public init(_ value: JSONValue, at position: SourcePosition = SourcePosition(line: 0, column: 0)) {
        self.value = value
        self.position = position
    }

    public static func == (lhs: JSONNode, rhs: JSONNode) -> Bool { lhs.value == rhs.value }

    public subscript(key: String) -> JSONNode? {
        guard case let .object(members) = value else { return nil }
        return members.last(where: { $0.key == key })?.node
    }

    /// Sets `key`, keeping the member's place when it exists.
    public mutating func set(_ key: String, _ node: JSONNode) {
        guard case var .object(members) = value else { return }
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].node = node
        } else {
            members.append((key, node))
        }
        value = .object(members)
    }

    /// Removes every member named `key`.
    public mutating func remove(_ key: String) {
        guard case let .object(members) = value else { return }
        value = .object(members.filter { $0.key != key })
    }

    /// Sets `key` to `node`, or removes it for nil.
    public mutating func set(_ key: String, _ node: JSONNode?) {
        if let node { set(key, node) } else { remove(key) }
    }
}
