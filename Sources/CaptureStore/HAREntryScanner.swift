import Foundation

/// Where each of a HAR file's `log.entries` lies in its bytes, found
/// without building the document: the import then reads one entry at a
/// time (Foundation's tree of a 54 MB file took 4 GB). Only the path to
/// the entries is checked here; each entry is checked as it is read.
struct HAREntryScanner {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0

    static func entries(in data: Data) throws -> [Range<Int>] {
        try data.withUnsafeBytes { bytes in
            var scanner = HAREntryScanner(bytes: bytes)
            return try scanner.document()
        }
    }

    private init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    private static let notHAR = HARImport.Failure(description: #"not a HAR file: expected {"log": {"entries": [...]}}"#)

    private mutating func document() throws -> [Range<Int>] {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        var found: [Range<Int>]?
        try members { scanner, key in
            guard key == "log" else { return false }
            try scanner.members { scanner, key in
                guard key == "entries" else { return false }
                found = try scanner.elements()
                return true
            }
            return true
        }
        skipWhitespace()
        guard let found, index == bytes.count else { throw Self.notHAR }
        return found
    }

    /// An object's members: `body` reads the value of a key it wants
    /// (returning true), the others are skipped.
    private mutating func members(_ body: (inout HAREntryScanner, String) throws -> Bool) throws {
        skipWhitespace()
        guard next() == UInt8(ascii: "{") else { throw Self.notHAR }
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            return
        }
        while true {
            skipWhitespace()
            let key = try string()
            skipWhitespace()
            guard next() == UInt8(ascii: ":") else { throw Self.notHAR }
            skipWhitespace()
            if try !body(&self, key) { try skipValue() }
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "}"): return
            default: throw Self.notHAR
            }
        }
    }

    /// An array of objects: where each one is.
    private mutating func elements() throws -> [Range<Int>] {
        guard next() == UInt8(ascii: "[") else { throw Self.notHAR }
        var ranges: [Range<Int>] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            return ranges
        }
        while true {
            skipWhitespace()
            let start = index
            guard peek() == UInt8(ascii: "{") else {
                throw HARImport.Failure(description: "entry \(ranges.count + 1): not an object")
            }
            try skipValue()
            ranges.append(start..<index)
            skipWhitespace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "]"): return ranges
            default: throw Self.notHAR
            }
        }
    }

    /// A key: only the ones wanted matter, so escapes are left as they are.
    private mutating func string() throws -> String {
        let start = index
        try skipString()
        return String(decoding: bytes[(start + 1)..<(index - 1)], as: UTF8.self)
    }

    private mutating func skipString() throws {
        guard next() == UInt8(ascii: "\"") else { throw Self.notHAR }
        while let byte = next() {
            if byte == UInt8(ascii: "\\") {
                index += 1
            } else if byte == UInt8(ascii: "\"") {
                return
            }
        }
        throw Self.notHAR
    }

    /// A whole value, nested or not, without recursion.
    private mutating func skipValue() throws {
        var depth = 0
        repeat {
            guard let byte = peek() else { throw Self.notHAR }
            switch byte {
            case UInt8(ascii: "\""): try skipString()
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                guard depth > 0 else { throw Self.notHAR }
                depth -= 1
                index += 1
            default:
                // A number, a literal, a separator or white space.
                guard depth > 0 || !Self.ends(byte) else { throw Self.notHAR }
                index += 1
                if depth == 0 {
                    while let byte = peek(), !Self.ends(byte) { index += 1 }
                }
            }
        } while depth > 0
    }

    private static func ends(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || byte == 0x20 || byte == 0x0A || byte == 0x0D
            || byte == 0x09
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func next() -> UInt8? {
        defer { index += 1 }
        return peek()
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
    }
}
