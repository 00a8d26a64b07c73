import Foundation

/// The child's one line: `claimed TOKEN JTI EXP`, `done`, or `failed TEXT`.
/// The supervisor (root) reads it back with `parse`, which takes only
/// these shapes, in token characters, and nothing longer than a token.
public enum CloudCallResult: Sendable, Equatable {
    case claimed(token: String, jti: String, expires: Int64)
    case done
    case failed(String)

    public var line: String {
        switch self {
        case let .claimed(token, jti, expires): return "claimed \(token) \(jti.isEmpty ? "-" : jti) \(expires)"
        case .done: return "done"
        case let .failed(text): return "failed \(Self.printable(text))"
        }
    }

    public static func parse(_ output: String) -> CloudCallResult? {
        guard output.utf8.count <= 20_000, let line = output.split(separator: "\n", omittingEmptySubsequences: false).first else {
            return nil
        }
        if line == "done" { return .done }
        if line.hasPrefix("failed ") {
            let text = String(line.dropFirst("failed ".count))
            guard text.unicodeScalars.allSatisfy({ $0.properties.generalCategory != .control }) else { return nil }
            return .failed(String(text.prefix(300)))
        }
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 4, words[0] == "claimed", DeviceToken.isWellFormed(String(words[1])), isWord(String(words[2])),
            words[3].utf8.count <= 12, words[3].utf8.allSatisfy({ (0x30...0x39).contains($0) }), let expires = Int64(words[3])
        else { return nil }
        return .claimed(token: String(words[1]), jti: words[2] == "-" ? "" : String(words[2]), expires: expires)
    }

    /// Text without control characters (no line breaks), cut short.
    public static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.properties.generalCategory != .control }).prefix(200))
    }

    /// An identifier (a jti, a uuid): letters, digits, `-`, `_`, `.`, `:`, at most 128.
    public static func isWord(_ text: String) -> Bool {
        text.utf8.count <= 128
            && text.utf8.allSatisfy {
                $0 == 0x2D || $0 == 0x5F || $0 == 0x2E || $0 == 0x3A || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                    || (0x61...0x7A).contains($0)
            }
    }
}
