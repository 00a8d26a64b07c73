import Foundation

/// One field of a protobuf message: its number, how it was encoded on the
/// wire, and what its bytes most likely are; read with a schema, also its
/// name and declared type, and its value read as that type.
public struct ProtobufField: Sendable, Equatable {
    public var number: Int
    public var wireType: ProtobufWire.WireType
    public var value: Value
    /// Where the field's tag starts, within its own message.
    public var offset: Int
    /// From a descriptor set: the field's name, its type as a `.proto`
    /// spells it (`int32`, `string`, `enum`, `message`, `map`), and a
    /// message's or enum's full name. Nil for a field the schema lacks.
    public var name: String?
    public var protoType: String?
    public var typeName: String?
    /// Why the declared type could not be applied (the wire disagrees).
    public var note: String?

    public init(number: Int, wireType: ProtobufWire.WireType, value: Value, offset: Int) {
        self.number = number
        self.wireType = wireType
        self.value = value
        self.offset = offset
    }

    /// The wire says only varint, 32 bits, 64 bits or length-delimited; a
    /// length-delimited field is told apart by what its bytes parse as.
    public indirect enum Value: Sendable, Equatable {
        case varint(UInt64)
        case fixed32(UInt32)
        case fixed64(UInt64)
        /// Printable UTF-8.
        case string(String)
        /// Its bytes parsed wholly as a message.
        case message([ProtobufField])
        /// Its bytes parsed wholly as minimally encoded varints (a packed
        /// repeated int32/int64/uint/bool/enum field, most likely); the bytes
        /// are kept, as they may be something else.
        case packedVarints([UInt64], Data)
        case bytes(Data)
        /// Read as its declared scalar type (a schema's field).
        case scalar(Scalar)
        /// A packed repeated field of a declared scalar type, and its bytes.
        case packed([Scalar], Data)
        /// A map field's entries, in the order they came.
        case map([MapEntry])

        /// The name the views give it.
        public var kind: String {
            switch self {
            case .varint: return "varint"
            case .fixed32: return "fixed32"
            case .fixed64: return "fixed64"
            case .string: return "string"
            case .message: return "message"
            case .packedVarints: return "packed_varint"
            case .bytes: return "bytes"
            case .scalar: return "scalar"
            case .packed: return "packed"
            case .map: return "map"
            }
        }
    }

    /// A value of a declared scalar type.
    public enum Scalar: Sendable, Equatable {
        case int(Int64)
        case uint(UInt64)
        case bool(Bool)
        case float(Float)
        case double(Double)
        /// An enum's number, and its name when the enum has one for it.
        case enumValue(Int32, String?)
    }

    public struct MapEntry: Sendable, Equatable {
        public var key: ProtobufField
        public var value: ProtobufField
    }
}
