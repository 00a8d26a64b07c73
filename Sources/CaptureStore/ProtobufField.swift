import Foundation

/// One field of a protobuf message read without its schema: its number,
/// how it was encoded on the wire, and what its bytes most likely are.
public struct ProtobufField: Sendable, Equatable {
    public var number: Int
    public var wireType: ProtobufWire.WireType
    public var value: Value
    /// Where the field's tag starts, within its own message.
    public var offset: Int

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
            }
        }
    }
}
