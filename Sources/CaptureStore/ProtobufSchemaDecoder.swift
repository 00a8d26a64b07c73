import Foundation

/// A message decoded by its type in a descriptor set: fields by name, each
/// read as its declared type (a string as text and bytes as bytes, not
/// guessed; enum values by name; packed and unpacked repeated fields; maps
/// as their entries). What the schema does not describe (an unknown field
/// number, a wire type the declared type cannot have, a type missing from
/// the set) is read as the schema-less view reads it, with a note. The same
/// limits hold as without a schema, and it never traps.
public enum ProtobufSchemaDecoder {
    public static func decode(
        _ data: Data, as type: String, schema: ProtobufSchema,
        limits: ProtobufWire.Limits = .standard
    ) -> Result<[ProtobufField], ProtobufWire.DecodeError> {
        guard let message = schema.messages[type] else { return ProtobufWire.decode(data, limits: limits) }
        var reader = Reader(parser: ProtobufWire.Parser(bytes: [UInt8](data), limits: limits), schema: schema)
        return reader.message(message, 0..<reader.parser.bytes.count, depth: 0)
    }

    struct Reader {
        var parser: ProtobufWire.Parser
        let schema: ProtobufSchema

        mutating func message(_ type: ProtobufSchema.Message, _ range: Range<Int>, depth: Int) -> Result<
            [ProtobufField], ProtobufWire.DecodeError
        > {
            var out: [ProtobufField] = []
            /// Where each map field's entries are gathered: at its first entry.
            var maps: [Int: Int] = [:]
            var index = range.lowerBound
            parser.work += range.count
            while index < range.upperBound {
                let raw: ProtobufWire.RawField
                switch parser.next(&index, in: range) {
                case let .success(field): raw = field
                case let .failure(error): return .failure(error)
                }
                let offset = raw.start - range.lowerBound
                guard let declared = type.fields[raw.number] else {
                    out.append(ProtobufField(number: raw.number, wireType: raw.wireType, value: guess(raw, depth: depth), offset: offset))
                    continue
                }
                var field = ProtobufField(number: raw.number, wireType: raw.wireType, value: .bytes(Data()), offset: offset)
                field.name = declared.name
                field.protoType = declared.type.name
                field.typeName = declared.typeName
                if schema.isMap(declared), raw.wireType == .len, let entryType = declared.typeName.flatMap({ schema.messages[$0] }),
                    let entry = mapEntry(entryType, raw.payload, depth: depth)
                {
                    if let at = maps[raw.number], case var .map(entries) = out[at].value {
                        entries.append(entry)
                        out[at].value = .map(entries)
                    } else {
                        field.protoType = "map"
                        field.value = .map([entry])
                        maps[raw.number] = out.count
                        out.append(field)
                    }
                    continue
                }
                if let value = read(raw, as: declared, depth: depth) {
                    field.value = value
                } else {
                    field.value = guess(raw, depth: depth)
                    field.note = note(raw, declared)
                }
                out.append(field)
            }
            return .success(out)
        }

        /// Why a field is not read as declared.
        func note(_ raw: ProtobufWire.RawField, _ declared: ProtobufSchema.Field) -> String {
            let what = declared.typeName ?? declared.type.name
            if declared.type == .message, declared.typeName.flatMap({ schema.messages[$0] }) == nil {
                return "type \(what) is not in the descriptor sets"
            }
            let fits = raw.wireType == declared.type.wireType || (raw.wireType == .len && declared.repeated && declared.type.packable)
            return fits ? "its bytes are no \(what)" : "declared \(what), but sent as \(raw.wireType.name)"
        }

        /// The schema-less reading of a field.
        mutating func guess(_ raw: ProtobufWire.RawField, depth: Int) -> ProtobufField.Value {
            switch raw.wireType {
            case .varint: return .varint(raw.scalar)
            case .i64: return .fixed64(raw.scalar)
            case .i32: return .fixed32(UInt32(truncatingIfNeeded: raw.scalar))
            default: return parser.lengthDelimited(raw.payload, depth: depth)
            }
        }

        /// The field read as declared; nil when the wire type does not fit.
        mutating func read(_ raw: ProtobufWire.RawField, as declared: ProtobufSchema.Field, depth: Int) -> ProtobufField.Value? {
            if raw.wireType == declared.type.wireType && raw.wireType != .len {
                return .scalar(scalar(raw.scalar, declared))
            }
            guard raw.wireType == .len else { return nil }
            let bytes = Data(parser.bytes[raw.payload])
            switch declared.type {
            case .string:
                guard let text = String(validating: parser.bytes[raw.payload], as: UTF8.self) else { return nil }
                return .string(text)
            case .bytes:
                return .bytes(bytes)
            case .message:
                guard let type = declared.typeName.flatMap({ schema.messages[$0] }) else { return nil }
                guard depth + 1 < parser.limits.maxDepth, parser.work < parser.limits.maxWork else { return .bytes(bytes) }
                let before = parser.fields
                if case let .success(fields) = message(type, raw.payload, depth: depth + 1) { return .message(fields) }
                parser.fields = before
                return nil
            default:
                guard declared.repeated, declared.type.packable, let values = packed(raw.payload, declared) else { return nil }
                return .packed(values, bytes)
            }
        }

        func scalar(_ v: UInt64, _ declared: ProtobufSchema.Field) -> ProtobufField.Scalar {
            switch declared.type {
            case .int32: return .int(Int64(Int32(truncatingIfNeeded: v)))
            case .int64, .sfixed64: return .int(Int64(bitPattern: v))
            case .sfixed32: return .int(Int64(Int32(bitPattern: UInt32(truncatingIfNeeded: v))))
            case .sint32, .sint64: return .int(ProtobufText.zigzag(v))
            case .uint32: return .uint(UInt64(UInt32(truncatingIfNeeded: v)))
            case .bool: return .bool(v != 0)
            case .float: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: v)))
            case .double: return .double(Double(bitPattern: v))
            case .enumeration:
                let number = Int32(truncatingIfNeeded: v)
                return .enumValue(number, declared.typeName.flatMap { schema.enums[$0]?.values[number] })
            default: return .uint(v)
            }
        }

        /// A packed field's values: varints, or 4- or 8-byte values, filling its bytes exactly.
        func packed(_ range: Range<Int>, _ declared: ProtobufSchema.Field) -> [ProtobufField.Scalar]? {
            var values: [ProtobufField.Scalar] = []
            var index = range.lowerBound
            let size = declared.type.wireType == .i32 ? 4 : 8
            while index < range.upperBound {
                if declared.type.wireType == .varint {
                    guard let (v, length) = ProtobufWire.varint(parser.bytes, at: index, end: range.upperBound) else { return nil }
                    values.append(scalar(v, declared))
                    index += length
                } else {
                    guard range.upperBound - index >= size else { return nil }
                    values.append(scalar(parser.littleEndian(index, size), declared))
                    index += size
                }
            }
            return values
        }

        /// A map entry (key 1, value 2; either may be left out, meaning its
        /// type's default); nil when its bytes are no such entry.
        mutating func mapEntry(_ type: ProtobufSchema.Message, _ range: Range<Int>, depth: Int) -> ProtobufField.MapEntry? {
            let before = parser.fields
            guard depth + 1 < parser.limits.maxDepth, case let .success(fields) = message(type, range, depth: depth + 1) else {
                parser.fields = before
                return nil
            }
            let key = fields.last { $0.number == 1 } ?? type.fields[1].map(defaultField)
            let value = fields.last { $0.number == 2 } ?? type.fields[2].map(defaultField)
            guard let key, let value else { return nil }
            return ProtobufField.MapEntry(key: key, value: value)
        }

        /// What a field left out of an entry stands for.
        func defaultField(_ declared: ProtobufSchema.Field) -> ProtobufField {
            var field = ProtobufField(number: declared.number, wireType: declared.type.wireType, value: .bytes(Data()), offset: 0)
            field.name = declared.name
            field.protoType = declared.type.name
            field.typeName = declared.typeName
            switch declared.type {
            case .string: field.value = .string("")
            case .bytes: field.value = .bytes(Data())
            case .message, .group: field.value = .message([])
            default: field.value = .scalar(scalar(0, declared))
            }
            return field
        }
    }
}
