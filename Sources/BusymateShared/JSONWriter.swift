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
            if elements.isEmpty { out += "[]"; return }
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
                if line.count + indent * 2 <= 100 { out += line; return }
            }
            out += "[\n"
            for (i, e) in elements.enumerated() {
                out += pad
                write(e.value, indent: indent + 1, into: &out)
                out += i == elements.count - 1 ? "\n" : ",\n"
            }
            out += closePad + "]"
        case let .object(members):
            if members.isEmpty { out += "{}"; return }
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
        if let text = scalar(value) {
            out += text
            return
        }
        switch value {
        case .null, .bool, .number, .string: break
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
                out += quote(m.key) + ":"
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
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
