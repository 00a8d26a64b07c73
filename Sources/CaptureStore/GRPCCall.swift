import Foundation

/// What a gRPC call was and how it ended: the service and method from the
/// path (`/package.Service/Method`), and `grpc-status` and `grpc-message`
/// from the response's trailers, or from its headers when the server
/// answered with trailers only (an error before any message).
public struct GRPCCall: Sendable, Equatable {
    public var service: String?
    public var method: String?
    public var status: Int?
    /// Percent-decoded, as the protocol sends it encoded.
    public var message: String?
    /// Where the status was found: `trailers` or `headers`.
    public var statusFrom: String?

    public var statusName: String? { status.map(Self.statusName) }

    public init(path: String, responseHeaders: [(String, String)], responseTrailers: [(String, String)]) {
        let route = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? path
        let parts = route.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 3, parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty {
            service = String(parts[1])
            method = String(parts[2])
        }
        for (source, fields) in [("trailers", responseTrailers), ("headers", responseHeaders)] {
            guard let value = Self.value("grpc-status", in: fields) else { continue }
            status = Int(value.trimmingCharacters(in: .whitespaces))
            message = Self.value("grpc-message", in: fields).map(Self.percentDecoded)
            statusFrom = source
            break
        }
    }

    static func value(_ name: String, in fields: [(String, String)]) -> String? {
        fields.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }

    /// The status codes' names (grpc/doc/statuscodes.md).
    public static func statusName(_ code: Int) -> String {
        let names = [
            "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
            "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
            "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
        ]
        return names.indices.contains(code) ? names[code] : "code \(code)"
    }

    /// `grpc-message` is percent-encoded UTF-8; a bad escape is kept as
    /// written (the spec says to), and bytes that are not UTF-8 are replaced.
    public static func percentDecoded(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hexValue(bytes[i + 1]), let low = hexValue(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
