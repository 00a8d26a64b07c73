import Foundation
import GRDB

/// One exchange: a request and its response, a failed request with its
/// error, or a passed-through tunnel with its byte counts.
public struct ExchangeRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "exchanges"

    public enum TLSMode: String, Codable, Sendable { case mitm, passthrough, none }

    public var id: Int64?
    /// A fresh UUID per exchange; unique, so a retried insert is harmless.
    public var requestID: String
    public var startedAt: Date
    public var connectedAt: Date?
    public var tlsDoneAt: Date?
    public var firstByteAt: Date?
    public var endedAt: Date?
    public var clientAddress: String?
    public var serverAddress: String?
    public var scheme: String
    public var method: String
    public var host: String
    public var port: Int
    public var path: String
    public var url: String
    public var httpVersion: String?
    public var status: Int?
    public var reason: String?
    /// `[[name, value], …]` as JSON: order and duplicates kept.
    public var requestHeaders: String
    public var responseHeaders: String?
    public var requestBodySize: Int
    public var responseBodySize: Int
    public var requestBody: Data?
    public var responseBody: Data?
    /// Stored past `capture.body_max`, or not at all when its file failed.
    public var requestBodyTruncated: Bool
    public var responseBodyTruncated: Bool
    /// Names under `bodies/` of bodies too large for the row (the row keeps
    /// their first bytes).
    public var requestBodyFile: String?
    public var responseBodyFile: String?
    /// Sizes after Content-Encoding is undone; nil when unknown (stored
    /// truncated, or an encoding that cannot be decoded).
    public var requestBodyDecodedSize: Int?
    public var responseBodyDecodedSize: Int?
    /// Body bytes this row keeps, inline and in files: what
    /// `capture.max_bytes` counts.
    public var storedBytes: Int
    public var tlsMode: TLSMode
    public var sni: String?
    public var tlsVersion: String?
    public var tlsCipher: String?
    public var error: String?
    public var bytesUp: Int?
    public var bytesDown: Int?
    /// The exchange this one re-sent (`busymate resend`).
    public var resentFrom: String?

    public init(requestID: String = UUID().uuidString.lowercased(), startedAt: Date = Date(), scheme: String, method: String,
                host: String, port: Int, path: String, url: String, tlsMode: TLSMode) {
        self.requestID = requestID
        self.startedAt = startedAt
        self.scheme = scheme
        self.method = method
        self.host = host
        self.port = port
        self.path = path
        self.url = url
        self.tlsMode = tlsMode
        requestHeaders = "[]"
        requestBodySize = 0
        responseBodySize = 0
        requestBodyTruncated = false
        responseBodyTruncated = false
        storedBytes = 0
    }

    enum CodingKeys: String, CodingKey {
        case id, requestID = "request_id", startedAt = "started_at", connectedAt = "connected_at", tlsDoneAt = "tls_done_at",
             firstByteAt = "first_byte_at", endedAt = "ended_at", clientAddress = "client_address", serverAddress = "server_address",
             scheme, method, host, port, path, url, httpVersion = "http_version", status, reason,
             requestHeaders = "request_headers", responseHeaders = "response_headers",
             requestBodySize = "request_body_size", responseBodySize = "response_body_size",
             requestBody = "request_body", responseBody = "response_body",
             requestBodyTruncated = "request_body_truncated", responseBodyTruncated = "response_body_truncated",
             requestBodyFile = "request_body_file", responseBodyFile = "response_body_file",
             requestBodyDecodedSize = "request_body_decoded_size", responseBodyDecodedSize = "response_body_decoded_size",
             storedBytes = "stored_bytes",
             tlsMode = "tls_mode", sni, tlsVersion = "tls_version", tlsCipher = "tls_cipher", error,
             bytesUp = "bytes_up", bytesDown = "bytes_down", resentFrom = "resent_from"
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }

    /// Headers as stored: an array of name/value pairs.
    public static func encodeHeaders(_ pairs: [(String, String)]) -> String {
        let array = pairs.map { [$0.0, $0.1] }
        guard let data = try? JSONSerialization.data(withJSONObject: array), let text = String(data: data, encoding: .utf8) else { return "[]" }
        return text
    }

    public static func decodeHeaders(_ text: String?) -> [(String, String)] {
        guard let text, let array = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String]] else { return [] }
        return array.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }
}
