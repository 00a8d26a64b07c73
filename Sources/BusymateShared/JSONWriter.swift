/// Writes a `JSONValue` back as pretty-printed JSON with two-space indents,
/// in the order its members were read.
public enum JSONWriter {
    public static func write(_ node: JSONNode) -> String {
        var out = ""
        write(node.value, indent: 0, into: &out)
        out.append("\n")
        return out
    }

    private static func write(_ value: JSONValue, indent: Int, into out: inout String) {
        let pad = String(repeating: "  ", count: indent + 1)
        let closePad = String(repeating: "  ", count: indent)
        if let text = scalar(value) {
            out += text
            return
        }
        switch value {
        case .null, .bool, .number, .string: break
        case let .array(elements):
            if elements.isEmpty {
                out += "[]"
                return
            }
            // Short arrays of scalars stay on one line, as people write them.
            let scalars = elements.allSatisfy {
                if case .array = $0.value { return false }
                if case .object = $0.value { return false }
                return true
            }
            if scalars {
                var line = "["
                for (i, e) in elements.enumerated() {
                    if i > 0 { line += ", " }
                    write(e.value, indent: indent + 1, into: &line)
                }
                line += "]"
                if line.count + indent * 2 <= 100 {
                    out += line
                    return
                }
            }
            out += "[\n"
            for (i, e) in elements.enumerated() {
                out += pad
                write(e.value, indent: indent + 1, into: &out)
                out += i == elements.count - 1 ? "\n" : ",\n"
            }
            out += closePad + "]"
        case let .object(members):
            if members.isEmpty {
                out += "{}"
                return
            }
            out += "{\n"
            for (i, m) in members.enumerated() {
                out += pad + quote(m.key) + ": "
                write(m.node.value, indent: indent + 1, into: &out)
                out += i == members.count - 1 ? "\n" : ",\n"
            }
            out += closePad + "}"
        }
    }

    /// One line, no spaces: for JSON lines (`tail --json`).
    public static func compact(_ node: JSONNode) -> String {
        var out = ""
        compact(node.value, into: &out)
        return out
    }

    private static func compact(_ value: JSONValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n): out += n
        case let .string(text): appendQuoted(text, into: &out)
        case let .array(elements):
            out += "["
            for (i, e) in elements.enumerated() {
                if i > 0 { out += "," }
                compact(e.value, into: &out)
            }
            out += "]"
        case let .object(members):
            out += "{"
            for (i, m) in members.enumerated() {
                if i > 0 { out += "," }
                appendQuoted(m.key, into: &out)
                out += ":"
                compact(m.node.value, into: &out)
            }
            out += "}"
        }
    }

    /// A scalar as written (numbers as they were read), or nil for an array or object.
    private static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        case let .number(n): return n
        case let .string(s): return quote(s)
        case .array, .object: return nil
        }
    }

    public static func quote(_ s: String) -> String {
        var out = ""
        appendQuoted(s, into: &out)
        return out
    }

    /// `text` as a JSON string. Most text needs no escape: it is appended
    /// whole, and otherwise in runs between the bytes that do (a quote, a
    /// backslash, a control character; all ASCII, so never inside a
    /// multi-byte character).
    static func appendQuoted(_ text: String, into out: inout String) {
        out += "\""
        var text = text
        if text.withUTF8({ !$0.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C } }) {
            out += text
            out += "\""
            return
        }
        text.withUTF8 { bytes in
            var start = 0
            for (i, byte) in bytes.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                if start < i { out += String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self) }
                switch byte {
                case 0x22: out += "\\\""
                case 0x5C: out += "\\\\"
                case 0x0A: out += "\\n"
                case 0x0D: out += "\\r"
                case 0x09: out += "\\t"
                default:
                    let hex = String(byte, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
                start = i + 1
            }
            if start < bytes.count { out += String(decoding: UnsafeBufferPointer(rebasing: bytes[start...]), as: UTF8.self) }
        }
        out += "\""
    }
}
