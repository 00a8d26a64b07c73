/// A strict RFC 8259 parser that records the line and column of every value
/// and of every error. Foundation's decoder reports neither reliably.
public struct JSONParser {
    public struct Error: Swift.Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var position: SourcePosition
        public var description: String { "\(position): \(message)" }
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0
    private var depth = 0
    private static let maxDepth = 256

    public static func parse(_ text: String) throws(Error) -> JSONNode {
        var parser = JSONParser(bytes: Array(text.utf8))
        return try parser.parseDocument()
    }

    public static func parse(_ bytes: [UInt8]) throws(Error) -> JSONNode {
        var parser = JSONParser(bytes: bytes)
        return try parser.parseDocument()
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private var position: SourcePosition {
        // Columns count characters, not bytes: skip UTF-8 continuation bytes.
        let column = bytes[lineStart..<min(index, bytes.count)].reduce(0) { $1 & 0xC0 == 0x80 ? $0 : $0 + 1 }
        return SourcePosition(line: line, column: column + 1)
    }

    /// Where a value starts, counted on from the last one on the same line:
    /// `position` counts from the line's start, which made a long
    /// single-line document quadratic (minified JSON is one line).
    private var counted: (lineStart: Int, index: Int, column: Int) = (0, 0, 0)

    private mutating func here() -> SourcePosition {
        if counted.lineStart != lineStart || counted.index > index { counted = (lineStart, lineStart, 0) }
        let end = min(index, bytes.count)
        var column = counted.column
        var i = counted.index
        while i < end {
            if bytes[i] & 0xC0 != 0x80 { column += 1 }
            i += 1
        }
        counted = (lineStart, end, column)
        return SourcePosition(line: line, column: column + 1)
    }

    private func fail(_ message: String) -> Error { Error(message: message, position: position) }

    private mutating func parseDocument() throws(Error) -> JSONNode {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            index = 3
            lineStart = 3
        }
        skipWhitespace()
        guard index < bytes.count else { throw fail("the file is empty; expected a JSON object") }
        let node = try parseValue()
        skipWhitespace()
        if index < bytes.count { throw fail("unexpected \(describeCurrent()) after the end of the document") }
        return node
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D: index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default: return
            }
        }
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of file" }
        let byte = bytes[index]
        if byte >= 0x20 && byte < 0x7F { return "character '\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16))"
    }

    private mutating func parseValue() throws(Error) -> JSONNode {
        skipWhitespace()
        let start = here()
        guard index < bytes.count else { throw fail("unexpected end of file; expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return JSONNode(try parseObject(), at: start)
        case UInt8(ascii: "["): return JSONNode(try parseArray(), at: start)
        case UInt8(ascii: "\""): return JSONNode(.string(try parseString()), at: start)
        case UInt8(ascii: "t"):
            try literal("true")
            return JSONNode(.bool(true), at: start)
        case UInt8(ascii: "f"):
            try literal("false")
            return JSONNode(.bool(false), at: start)
        case UInt8(ascii: "n"):
            try literal("null")
            return JSONNode(.null, at: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return JSONNode(.number(try parseNumber()), at: start)
        default: throw fail("unexpected \(describeCurrent()); expected a value")
        }
    }

    private mutating func literal(_ word: String) throws(Error) {
        let utf8 = Array(word.utf8)
        guard bytes.count - index >= utf8.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
            throw fail("unexpected \(describeCurrent()); expected a value")
        }
        index += utf8.count
    }

    private mutating func enter() throws(Error) {
        depth += 1
        if depth > Self.maxDepth { throw fail("nesting deeper than \(Self.maxDepth) levels") }
    }

    private mutating func parseObject() throws(Error) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [(key: String, node: JSONNode)] = []
        var keys = Set<String>()
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw fail("unexpected \(describeCurrent()); expected a quoted key")
            }
            let keyPosition = here()
            let key = try parseString()
            if !keys.insert(key).inserted {
                throw Error(message: "duplicate key \"\(key)\"", position: keyPosition)
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw fail("unexpected \(describeCurrent()); expected ':' after key \"\(key)\"")
            }
            index += 1
            members.append((key, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of file; expected ',' or '}'") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw fail("unexpected \(describeCurrent()); expected ',' or '}'")
        }
    }

    private mutating func parseArray() throws(Error) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSONNode] = []
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of file; expected ',' or ']'") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw fail("unexpected \(describeCurrent()); expected ',' or ']'")
        }
    }

    private mutating func parseString() throws(Error) -> String {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8 in string") }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired UTF-16 surrogate in \\u escape")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid UTF-16 surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    index -= 1
                    throw fail("invalid escape '\\\(Character(Unicode.Scalar(escape)))'")
                }
            case 0x00..<0x20:
                throw fail(byte == 0x0A ? "unterminated string (a line break inside quotes)" : "control character in string")
            default:
                out.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    private mutating func hex4() throws(Error) -> UInt32 {
        guard bytes.count - index >= 4 else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(Error) -> String {
        let start = index
        func digits(_ parser: inout JSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index]) {
                parser.index += 1
            }
            return parser.index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw fail("truncated number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if digits(&self) == 0 {
            throw fail("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            if digits(&self) == 0 { throw fail("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            if digits(&self) == 0 { throw fail("expected digits in exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
}
