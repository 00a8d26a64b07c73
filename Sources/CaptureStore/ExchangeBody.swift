import Foundation

/// One side's body as the views show it: the bytes kept (the whole file
/// when there is one), and the bytes shown, decoded from Content-Encoding
/// unless `raw` (or when they cannot be: stored truncated, or not valid).
public struct ExchangeBody: Sendable {
    public var direction: BodyStore.Direction
    public var wireSize: Int
    /// After Content-Encoding is undone, when known.
    public var decodedSize: Int?
    public var contentType: String?
    public var encoding: String?
    public var stored: Data?
    public var truncated: Bool
    public var file: String?
    public var shown: Data?
    public var decoded = false
    /// Why the shown bytes are not decoded, when they should have been.
    public var undecodable: String?

    public init(_ record: ExchangeRecord, _ direction: BodyStore.Direction, bodies: BodyStore, raw: Bool) throws {
        self.direction = direction
        let request = direction == .request
        wireSize = request ? record.requestBodySize : record.responseBodySize
        decodedSize = request ? record.requestBodyDecodedSize : record.responseBodyDecodedSize
        contentType = record.header("content-type", direction)
        encoding = record.header("content-encoding", direction)
        truncated = request ? record.requestBodyTruncated : record.responseBodyTruncated
        file = request ? record.requestBodyFile : record.responseBodyFile
        stored = try bodies.body(of: record, direction)
        shown = stored
        guard !raw, let encoding, let stored, !stored.isEmpty, encoding.lowercased() != "identity" else { return }
        if truncated {
            undecodable = "stored truncated"
        } else if let plain = BodyDecoder.decode(stored, encoding: encoding) {
            shown = plain
            decoded = true
        } else {
            undecodable = "cannot decode \(encoding) (or it decodes to more than \(BodyDecoder.maxDecodedSize >> 20) MiB)"
        }
    }

    /// `length` bytes from `offset` of what the views show, and the shown
    /// size: read from the body file alone when the file's bytes are what
    /// is shown (raw, or no Content-Encoding), else decoded whole.
    public static func window(
        of record: ExchangeRecord, _ direction: BodyStore.Direction, bodies: BodyStore, raw: Bool,
        offset: Int, length: Int
    ) throws -> (data: Data, total: Int) {
        let file = direction == .request ? record.requestBodyFile : record.responseBodyFile
        let encoding = record.header("content-encoding", direction)?.lowercased()
        if let file, raw || encoding == nil || encoding == "identity" {
            do {
                return try bodies.read(file, offset: offset, length: length)
            } catch {
                let row = record.id.map { "exchange \($0)" } ?? "an exchange"
                throw BodyStoreError(description: "\(row)'s \(direction.rawValue) body file: \(error.description)")
            }
        }
        let shown = try ExchangeBody(record, direction, bodies: bodies, raw: raw).shown ?? Data()
        guard offset < shown.count else { return (Data(), shown.count) }
        return (Data(shown[(shown.startIndex + offset)..<(shown.startIndex + min(shown.count, offset + length))]), shown.count)
    }

    /// The shown bytes as text, or nil when they are binary: not UTF-8, or
    /// holding control characters text does not have.
    public var text: String? {
        guard let shown else { return nil }
        // ESC is not text here: a body could otherwise drive the terminal.
        guard !shown.contains(where: { $0 < 0x20 && ![0x09, 0x0A, 0x0D, 0x0C].contains($0) || $0 == 0x7F }) else { return nil }
        return String(validating: shown, as: UTF8.self)
    }

    public var isJSON: Bool { contentType?.lowercased().contains("json") ?? false }
}

/// `xxd`'s layout: offset, 16 bytes in two groups, and the printable ones.
public enum HexDump {
    public static func lines(_ data: Data) -> [String] {
        let bytes = [UInt8](data)
        return stride(from: 0, to: bytes.count, by: 16).map { start in
            let row = bytes[start..<min(start + 16, bytes.count)]
            var line = String(start, radix: 16).leftPadded(8) + "  "
            for (i, byte) in row.enumerated() {
                line += String(byte, radix: 16).leftPadded(2) + (i == 7 ? "  " : " ")
            }
            line += String(repeating: " ", count: (16 - row.count) * 3 + (row.count <= 7 ? 1 : 0))
            line += " |" + String(row.map { $0 >= 0x20 && $0 < 0x7F ? Character(UnicodeScalar($0)) : "." }) + "|"
            return line
        }
    }
}

extension String {
    public func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
