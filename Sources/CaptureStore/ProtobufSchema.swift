import Foundation

/// What a `FileDescriptorSet` (`protoc --include_imports -o api.pb …`) says
/// of the messages a gRPC call sends: each message's fields by number, each
/// enum's value names, and each method's request and response types by the
/// path a call is made on. Names are full (`pkg.Outer.Inner`), without
/// protoc's leading dot.
public struct ProtobufSchema: Sendable {
    /// `FieldDescriptorProto.Type`.
    public enum FieldType: Int, Sendable {
        case double = 1, float, int64, uint64, int32, fixed64, fixed32, bool, string, group, message, bytes, uint32,
            enumeration, sfixed32, sfixed64, sint32, sint64

        /// As a `.proto` file spells it.
        public var name: String {
            switch self {
            case .double: return "double"
            case .float: return "float"
            case .int64: return "int64"
            case .uint64: return "uint64"
            case .int32: return "int32"
            case .fixed64: return "fixed64"
            case .fixed32: return "fixed32"
            case .bool: return "bool"
            case .string: return "string"
            case .group: return "group"
            case .message: return "message"
            case .bytes: return "bytes"
            case .uint32: return "uint32"
            case .enumeration: return "enum"
            case .sfixed32: return "sfixed32"
            case .sfixed64: return "sfixed64"
            case .sint32: return "sint32"
            case .sint64: return "sint64"
            }
        }

        /// How a single value of the type is sent.
        public var wireType: ProtobufWire.WireType {
            switch self {
            case .double, .fixed64, .sfixed64: return .i64
            case .float, .fixed32, .sfixed32: return .i32
            case .int64, .uint64, .int32, .bool, .uint32, .enumeration, .sint32, .sint64: return .varint
            case .string, .bytes, .message: return .len
            case .group: return .startGroup
            }
        }

        /// Repeated fields of these may come packed (and must be read
        /// either way, whatever the `packed` option says).
        public var packable: Bool { wireType != .len && wireType != .startGroup }
    }

    public struct Field: Sendable, Equatable {
        public var name: String
        public var number: Int
        public var type: FieldType
        public var repeated: Bool
        /// A message's or enum's full name.
        public var typeName: String?
        /// The `packed` option as written (nil when not); decoding reads a
        /// repeated scalar packed or not, as protobuf's parsers do.
        public var packed: Bool?
    }

    public struct Message: Sendable {
        public var name: String
        public var fields: [Int: Field] = [:]
        /// A map's entry type (`map_entry`): key is field 1, value field 2.
        public var mapEntry = false
    }

    public struct Enumeration: Sendable {
        public var name: String
        public var values: [Int32: String] = [:]
    }

    public struct Method: Sendable, Equatable {
        public var input: String
        public var output: String
    }

    public var messages: [String: Message] = [:]
    public var enums: [String: Enumeration] = [:]
    /// By the path a call is made on: `/pkg.Service/Method`.
    public var methods: [String: Method] = [:]
    /// The `.proto` files the sets hold.
    public var files: [String] = []

    public init() {}

    /// The set's contents added; a name given twice keeps its first meaning
    /// (as the first file named in settings).
    public mutating func merge(_ other: ProtobufSchema) {
        messages.merge(other.messages) { first, _ in first }
        enums.merge(other.enums) { first, _ in first }
        methods.merge(other.methods) { first, _ in first }
        files += other.files
    }

    /// A call's method, by its path (a query is no part of it).
    public func method(path: String) -> Method? {
        let route = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? path
        return methods[route]
    }

    /// Whether a repeated message field is a map (its type is an entry).
    public func isMap(_ field: Field) -> Bool {
        field.repeated && field.type == .message && field.typeName.flatMap { messages[$0]?.mapEntry } == true
    }
}
