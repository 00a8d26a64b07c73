import Foundation

/// Protobuf decoded without a schema, as mitmproxy's protobuf and gRPC
/// views do: field numbers and wire types, a length-delimited field shown as
/// text when it is printable UTF-8, as a nested message when its bytes parse
/// wholly as one, as packed varints when they parse as those, else as bytes.
/// Bytes come from the network: every read is bounds-checked, nesting and
/// work are capped, and bad input is an error saying where, never a trap.
public enum ProtobufWire {
    public enum WireType: UInt8, Sendable {
        case varint = 0, i64 = 1, len = 2, startGroup = 3, endGroup = 4, i32 = 5

        public var name: String {
            switch self {
            case .varint: return "varint"
            case .i64: return "i64"
            case .len: return "len"
            case .startGroup: return "sgroup"
            case .endGroup: return "egroup"
            case .i32: return "i32"
            }
        }
    }

    public struct Limits: Sendable {
        /// Messages within messages; deeper fields stay bytes (protobuf's own
        /// parsers stop at 100).
        public var maxDepth = 64
        /// Fields decoded in all, nested ones included.
        public var maxFields = 100_000
        /// Bytes looked at in all, failed attempts at nested messages
        /// included: hostile nesting cannot make decoding quadratic.
        public var maxWork = 64 << 20

        public init() {}
        public static let standard = Limits()
    }

    public struct DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
        /// Where in the message it went wrong.
        public var offset: Int
        public var reason: String
        public var description: String { "\(reason) at byte \(offset)" }
    }

    /// The fields of the message `data` holds; an error when its bytes are
    /// not one (a group, a truncated field, a bad wire type, field 0).
    public static func decode(_ data: Data, limits: Limits = .standard) -> Result<[ProtobufField], DecodeError> {
        var parser = Parser(bytes: [UInt8](data), limits: limits)
        return parser.message(0..<parser.bytes.count, depth: 0)
    }

    /// A varint's value and length at `start`, nil when it is cut short or
    /// longer than 64 bits.
    static func varint(_ bytes: [UInt8], at start: Int, end: Int) -> (value: UInt64, length: Int)? {
        var value: UInt64 = 0
        var index = start
        var shift: UInt64 = 0
        while index < end, shift < 64 {
            let byte = bytes[index]
            // The tenth byte holds the 64th bit only.
            if shift == 63 && byte > 1 { return nil }
            value |= UInt64(byte & 0x7F) << shift
            index += 1
            if byte & 0x80 == 0 { return (value, index - start) }
            shift += 7
        }
        return nil
    }

    /// Text a person would read: UTF-8 without control characters other
    /// than tab and line breaks (so no escape sequence reaches a terminal).
    static func printable(_ bytes: ArraySlice<UInt8>) -> String? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        for scalar in text.unicodeScalars {
            let v = scalar.value
            if v < 0x20 && v != 0x09 && v != 0x0A && v != 0x0D { return nil }
            if (0x7F...0x9F).contains(v) { return nil }
        }
        return text
    }

    /// One field as the wire gives it: a varint's or fixed field's value in
    /// `scalar`, a length-delimited field's bytes in `payload` (indices of
    /// the parser's bytes); `start` is where its tag is.
    struct RawField {
        var number: Int
        var wireType: WireType
        var start: Int
        var scalar: UInt64
        var payload: Range<Int>
    }

    /// The one reader of protobuf's wire format here: the schema-less view,
    /// descriptor sets and the schema's view all read fields through it.
    struct Parser {
        let bytes: [UInt8]
        let limits: Limits
        var work = 0
        var fields = 0

        init(bytes: [UInt8], limits: Limits) {
            self.bytes = bytes
            self.limits = limits
        }

        mutating func message(_ range: Range<Int>, depth: Int) -> Result<[ProtobufField], DecodeError> {
            var out: [ProtobufField] = []
            var index = range.lowerBound
            work += range.count
            while index < range.upperBound {
                let raw: RawField
                switch next(&index, in: range) {
                case let .success(field): raw = field
                case let .failure(error): return .failure(error)
                }
                let value: ProtobufField.Value
                switch raw.wireType {
                case .varint: value = .varint(raw.scalar)
                case .i64: value = .fixed64(raw.scalar)
                case .i32: value = .fixed32(UInt32(truncatingIfNeeded: raw.scalar))
                default: value = lengthDelimited(raw.payload, depth: depth)
                }
                out.append(ProtobufField(number: raw.number, wireType: raw.wireType, value: value, offset: raw.start - range.lowerBound))
            }
            return .success(out)
        }

        /// The field at `index` of the message in `range`, counted against
        /// the limit on fields; `index` moves past it. Groups are refused.
        mutating func next(_ index: inout Int, in range: Range<Int>) -> Result<RawField, DecodeError> {
            let start = index
            let end = range.upperBound
            func failure(_ reason: String) -> Result<RawField, DecodeError> {
                .failure(DecodeError(offset: start - range.lowerBound, reason: reason))
            }
            guard let (tag, tagLength) = ProtobufWire.varint(bytes, at: index, end: end) else { return failure("a field tag cut short") }
            index += tagLength
            guard tag <= UInt64(UInt32.max) else { return failure("a field tag past 32 bits") }
            let number = Int(tag >> 3)
            guard number > 0 else { return failure("field number 0") }
            guard let wireType = WireType(rawValue: UInt8(tag & 7)) else { return failure("wire type \(tag & 7) (there is none such)") }
            fields += 1
            guard fields <= limits.maxFields else { return failure("more than \(limits.maxFields) fields") }
            var field = RawField(number: number, wireType: wireType, start: start, scalar: 0, payload: index..<index)
            switch wireType {
            case .varint:
                guard let (v, length) = ProtobufWire.varint(bytes, at: index, end: end) else {
                    return failure("field \(number): a varint cut short or past 64 bits")
                }
                index += length
                field.scalar = v
            case .i64:
                guard end - index >= 8 else { return failure("field \(number): 8 bytes of fixed64, \(end - index) left") }
                field.scalar = littleEndian(index, 8)
                index += 8
            case .i32:
                guard end - index >= 4 else { return failure("field \(number): 4 bytes of fixed32, \(end - index) left") }
                field.scalar = littleEndian(index, 4)
                index += 4
            case .len:
                guard let (length, lengthSize) = ProtobufWire.varint(bytes, at: index, end: end) else {
                    return failure("field \(number): a length cut short")
                }
                index += lengthSize
                guard length <= UInt64(end - index) else { return failure("field \(number) declares \(length) bytes, \(end - index) left") }
                field.payload = index..<(index + Int(length))
                index = field.payload.upperBound
            case .startGroup, .endGroup:
                return failure("field \(number): a group (wire type \(wireType.rawValue)), which is not decoded")
            }
            return .success(field)
        }

        func littleEndian(_ start: Int, _ count: Int) -> UInt64 {
            var value: UInt64 = 0
            for i in 0..<count { value |= UInt64(bytes[start + i]) << (8 * UInt64(i)) }
            return value
        }

        /// Text first (as mitmproxy does: printable text rarely parses as a
        /// message, and when it does the text is the likelier reading), then
        /// a nested message, then packed varints, else bytes.
        mutating func lengthDelimited(_ range: Range<Int>, depth: Int) -> ProtobufField.Value {
            if range.isEmpty { return .string("") }
            work += range.count
            if let text = ProtobufWire.printable(bytes[range]) { return .string(text) }
            // Past the limits nothing more is guessed: the bytes are shown.
            guard depth + 1 < limits.maxDepth, work < limits.maxWork else { return .bytes(Data(bytes[range])) }
            let before = fields
            if case let .success(nested) = message(range, depth: depth + 1), !nested.isEmpty {
                return .message(nested)
            }
            // What a failed attempt counted is not shown.
            fields = before
            if let values = packedVarints(range) { return .packedVarints(values, Data(bytes[range])) }
            return .bytes(Data(bytes[range]))
        }

        /// Two or more varints filling `range` exactly, each in its shortest
        /// form (encoders write no other).
        private func packedVarints(_ range: Range<Int>) -> [UInt64]? {
            var values: [UInt64] = []
            var index = range.lowerBound
            while index < range.upperBound {
                guard let (value, length) = ProtobufWire.varint(bytes, at: index, end: range.upperBound) else { return nil }
                if length > 1 && bytes[index + length - 1] == 0 { return nil }
                values.append(value)
                index += length
            }
            return values.count >= 2 ? values : nil
        }
    }
}
