import BusymateShared
import Foundation

/// Decoded protobuf fields for people and for `--json`: lines indented like
/// mitmproxy's view (`number: value  # other readings`, or `name (number):
/// value` for a field a descriptor set names; a nested message's fields and
/// a map's entries two spaces in), and JSON members per field
/// (docs/usage.md, "gRPC" and "JSON output").
public enum ProtobufText {
    /// Bytes and text past these are cut in lines (not in JSON).
    static let hexLimit = 64
    static let textLimit = 2000

    public static func lines(_ fields: [ProtobufField], indent: String = "") -> [String] {
        var out: [String] = []
        for field in fields {
            let key = indent + label(field) + ":"
            switch field.value {
            case let .message(nested):
                out.append(key + noted("", field.note))
                out += lines(nested, indent: indent + "  ")
            case let .map(entries):
                out.append(key)
                for entry in entries {
                    let head = indent + "  " + value(entry.key.value) + ":"
                    if case let .message(nested) = entry.value.value {
                        out.append(head)
                        out += lines(nested, indent: indent + "    ")
                    } else {
                        out.append(head + " " + noted(value(entry.value.value), entry.value.note))
                    }
                }
            default:
                out.append(key + " " + noted(value(field.value), field.note))
            }
        }
        return out
    }

    /// `name (1)` for a field the schema names, else its number.
    static func label(_ field: ProtobufField) -> String {
        field.name.map { "\($0) (\(field.number))" } ?? "\(field.number)"
    }

    /// A note after a value, in its comment when it has one.
    static func noted(_ shown: String, _ note: String?) -> String {
        guard let note else { return shown }
        return shown + (shown.contains("  # ") ? ", " : "  # ") + note
    }

    /// A value read as its declared type; `short` leaves an enum's number out.
    static func scalar(_ s: ProtobufField.Scalar, short: Bool = false) -> String {
        switch s {
        case let .int(v): return "\(v)"
        case let .uint(v): return "\(v)"
        case let .bool(b): return b ? "true" : "false"
        case let .float(f): return "\(f)"
        case let .double(d): return "\(d)"
        case let .enumValue(n, name):
            guard let name else { return short ? "\(n)" : "\(n)  # no name for it in the enum" }
            return short ? name : "\(name)  # \(n)"
        }
    }

    /// A field's value as its line shows it (a message's is its lines).
    static func value(_ value: ProtobufField.Value) -> String {
        switch value {
        case let .varint(v):
            return varint(v)
        case let .fixed32(v):
            let signed = Int32(bitPattern: v)
            var notes: [String] = []
            if signed < 0 { notes.append("i32: \(signed)") }
            if let f = plausibleFloat(Double(Float(bitPattern: v))) { notes.append("float: \(f)") }
            return "!fixed32 \(v)" + comment(notes)
        case let .fixed64(v):
            let signed = Int64(bitPattern: v)
            var notes: [String] = []
            if signed < 0 { notes.append("i64: \(signed)") }
            if let d = plausibleFloat(Double(bitPattern: v)) { notes.append("double: \(d)") }
            return "!fixed64 \(v)" + comment(notes)
        case let .string(text):
            let cut = text.count > textLimit
            return quoted(cut ? String(text.prefix(textLimit)) : text)
                + (cut ? "  # \(text.utf8.count) bytes, first \(textLimit) characters shown" : "")
        case .message:
            return ""
        case let .packedVarints(values, data):
            let shown = values.prefix(hexLimit).map(String.init).joined(separator: ", ") + (values.count > hexLimit ? ", …" : "")
            return "[\(shown)]  # packed varints (\(values.count)), or bytes \(hex(data))"
        case let .bytes(data):
            return "!bytes \(hex(data))" + (data.count > hexLimit ? "  # \(data.count) bytes" : "")
        case let .scalar(s):
            return scalar(s)
        case let .packed(values, _):
            let shown =
                values.prefix(hexLimit).map { scalar($0, short: true) }.joined(separator: ", ") + (values.count > hexLimit ? ", …" : "")
            return "[\(shown)]  # packed (\(values.count))"
        case .map:
            return ""
        }
    }

    /// mitmproxy's reading of a varint: as written, and zigzag-decoded (a
    /// sint32/sint64); past Int64.max, the negative int64 it most likely is.
    static func varint(_ v: UInt64) -> String {
        if v > UInt64(Int64.max) { return "\(Int64(bitPattern: v))  # u64: \(v)" }
        return "\(v)  # sint: \(zigzag(v))"
    }

    public static func zigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

    /// A float worth showing: finite, and zero or of a size numbers have
    /// (most integers' bits read as floats are tiny or huge).
    static func plausibleFloat(_ d: Double) -> String? {
        guard d.isFinite, d == 0 || (abs(d) >= 1e-6 && abs(d) < 1e15) else { return nil }
        return String(format: "%.9g", d)
    }

    static func comment(_ notes: [String]) -> String { notes.isEmpty ? "" : "  # " + notes.joined(separator: ", ") }

    static func hex(_ data: Data, limit: Int = hexLimit) -> String {
        let digits = Array("0123456789abcdef")
        var out = ""
        out.reserveCapacity(min(data.count, limit) * 2 + 1)
        for byte in data.prefix(limit) {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return data.count > limit ? out + "…" : out
    }

    /// JSON string syntax: quotes, and escapes for what is not plain.
    static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        ExchangeRecord.appendJSONString(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: JSON

    public static func json(_ fields: [ProtobufField]) -> JSONNode {
        ExchangeJSON.array(fields.map(json))
    }

    static func json(_ field: ProtobufField) -> JSONNode {
        var members: [ExchangeJSON.Member] = [
            ("number", ExchangeJSON.number(field.number)), ("wire_type", ExchangeJSON.string(field.wireType.name)),
            ("type", ExchangeJSON.string(jsonType(field))),
        ]
        // What a descriptor set says of it, for fields it names.
        if let name = field.name {
            members += [
                ("name", ExchangeJSON.string(name)), ("proto_type", ExchangeJSON.string(field.protoType)),
                ("type_name", ExchangeJSON.string(field.typeName)),
            ]
        }
        if let note = field.note { members.append(("note", ExchangeJSON.string(note))) }
        // The line `show` prints, for views that print it (JavaScript's numbers lose 64-bit values).
        switch field.value {
        case .message, .map: break
        default: members.append(("display", ExchangeJSON.string(value(field.value))))
        }
        switch field.value {
        case let .varint(v):
            members.append(("value", ExchangeJSON.number(v)))
            members.append(
                v > UInt64(Int64.max) ? ("int64", ExchangeJSON.number(Int64(bitPattern: v))) : ("sint", ExchangeJSON.number(zigzag(v))))
        case let .fixed32(v):
            members += [
                ("value", ExchangeJSON.number(v)), ("int32", ExchangeJSON.number(Int32(bitPattern: v))),
                ("float", float(Double(Float(bitPattern: v)), digits: 9)),
            ]
        case let .fixed64(v):
            members += [
                ("value", ExchangeJSON.number(v)), ("int64", ExchangeJSON.number(Int64(bitPattern: v))),
                ("double", float(Double(bitPattern: v), digits: 17)),
            ]
        case let .string(text):
            members.append(("value", ExchangeJSON.string(text)))
        case let .message(nested):
            members.append(("fields", json(nested)))
        case let .packedVarints(values, data):
            members += [
                ("values", ExchangeJSON.array(values.map { ExchangeJSON.number($0) })),
                ("hex", ExchangeJSON.string(hex(data, limit: .max))),
            ]
        case let .bytes(data):
            members.append(("hex", ExchangeJSON.string(hex(data, limit: .max))))
        case let .scalar(s):
            members += scalarJSON(s)
        case let .packed(values, data):
            members += [
                ("values", ExchangeJSON.array(values.map { scalarJSON($0)[0].node })), ("hex", ExchangeJSON.string(hex(data, limit: .max))),
            ]
            if values.contains(where: { if case .enumValue = $0 { return true } else { return false } }) {
                members.append(("enums", ExchangeJSON.array(values.map { scalarJSON($0).last?.node ?? JSONNode(.null) })))
            }
        case let .map(entries):
            members.append(
                ("entries", ExchangeJSON.array(entries.map { ExchangeJSON.object([("key", json($0.key)), ("value", json($0.value))]) })))
        }
        return ExchangeJSON.object(members)
    }

    /// A declared scalar's type in the vocabulary of the schema-less view:
    /// how it was sent.
    static func jsonType(_ field: ProtobufField) -> String {
        guard case .scalar = field.value else { return field.value.kind }
        switch field.wireType {
        case .i32: return "fixed32"
        case .i64: return "fixed64"
        default: return "varint"
        }
    }

    /// `value` as the declared type reads it; an enum's also `enum`, its name.
    static func scalarJSON(_ s: ProtobufField.Scalar) -> [ExchangeJSON.Member] {
        switch s {
        case let .int(v): return [("value", ExchangeJSON.number(v))]
        case let .uint(v): return [("value", ExchangeJSON.number(v))]
        case let .bool(b): return [("value", ExchangeJSON.bool(b))]
        case let .float(f): return [("value", float(Double(f), digits: 9))]
        case let .double(d): return [("value", float(d, digits: 17))]
        case let .enumValue(n, name): return [("value", ExchangeJSON.number(n)), ("enum", ExchangeJSON.string(name))]
        }
    }

    /// JSON has no NaN or infinity: those are null.
    static func float(_ d: Double, digits: Int) -> JSONNode {
        d.isFinite ? JSONNode(.number(String(format: "%.\(digits)g", d))) : JSONNode(.null)
    }
}
