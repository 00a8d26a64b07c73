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
    /// The rules that applied (`settings.json` names), comma-separated.
    public var rule: String?
    /// Not captured here: read from a HAR file of this name.
    public var imported: String?
    /// A DNS query the forwarder answered: retention keeps these apart.
    public var isDNS: Bool { scheme == "dns" }
    /// The device that sent it: a named device, else the client's address.
    public var device: String?
    /// How it arrived: `proxy`, `transparent`, `port` (a device's port) or `dns`.
    public var frontEnd: String?
    /// A user's mark (mitmproxy's marker: `default`, or a word or emoji of
    /// theirs); nil when unmarked.
    public var marker: String?
    /// A user's note on the exchange.
    public var comment: String?
    /// What Busymate changed or noticed that is no failure (a request
    /// target it percent-encoded): not `error`, so `~e` keeps meaning failed.
    public var note: String?
    /// The HTTP/2 stream id (nil for HTTP/1).
    public var streamID: Int?
    /// The same for every exchange of one client connection: short opaque text.
    public var connectionID: String?
    /// Trailers, `[[name, value], …]` as JSON like headers; nil when there were none.
    public var requestTrailers: String?
    public var responseTrailers: String?

    public init(
        requestID: String = RequestID.make(), startedAt: Date = Date(), scheme: String, method: String,
        host: String, port: Int, path: String, url: String, tlsMode: TLSMode
    ) {
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
            bytesUp = "bytes_up", bytesDown = "bytes_down", resentFrom = "resent_from", rule, imported, device, frontEnd = "front_end",
            marker, comment, note,
            streamID = "stream_id", connectionID = "connection_id", requestTrailers = "request_trailers", responseTrailers =
            "response_trailers"
    }

    /// By hand rather than through Codable: the writer saves thousands of
    /// rows a second and Codable's encoder was a third of its time.
    public func encode(to container: inout PersistenceContainer) throws {
        container["id"] = id
        container["request_id"] = requestID
        container["started_at"] = startedAt
        container["connected_at"] = connectedAt
        container["tls_done_at"] = tlsDoneAt
        container["first_byte_at"] = firstByteAt
        container["ended_at"] = endedAt
        container["client_address"] = clientAddress
        container["server_address"] = serverAddress
        container["scheme"] = scheme
        container["method"] = method
        container["host"] = host
        container["port"] = port
        container["path"] = path
        container["url"] = url
        container["http_version"] = httpVersion
        container["status"] = status
        container["reason"] = reason
        container["request_headers"] = requestHeaders
        container["response_headers"] = responseHeaders
        container["request_body_size"] = requestBodySize
        container["response_body_size"] = responseBodySize
        container["request_body"] = requestBody
        container["response_body"] = responseBody
        container["request_body_truncated"] = requestBodyTruncated
        container["response_body_truncated"] = responseBodyTruncated
        container["request_body_file"] = requestBodyFile
        container["response_body_file"] = responseBodyFile
        container["request_body_decoded_size"] = requestBodyDecodedSize
        container["response_body_decoded_size"] = responseBodyDecodedSize
        container["stored_bytes"] = storedBytes
        container["tls_mode"] = tlsMode.rawValue
        container["sni"] = sni
        container["tls_version"] = tlsVersion
        container["tls_cipher"] = tlsCipher
        container["error"] = error
        container["bytes_up"] = bytesUp
        container["bytes_down"] = bytesDown
        container["resent_from"] = resentFrom
        container["rule"] = rule
        container["imported"] = imported
        container["device"] = device
        container["front_end"] = frontEnd
        container["marker"] = marker
        container["comment"] = comment
        container["note"] = note
        container["stream_id"] = streamID
        container["connection_id"] = connectionID
        container["request_trailers"] = requestTrailers
        container["response_trailers"] = responseTrailers
    }

    /// One prepared statement for every insert (the writer's hot path).
    static let insertSQL = """
        INSERT OR IGNORE INTO exchanges (
          request_id, started_at, connected_at, tls_done_at, first_byte_at, ended_at, client_address,
          server_address, scheme, method, host, port, path, url, http_version, status, reason,
          request_headers, response_headers, request_body_size, response_body_size, request_body,
          response_body, request_body_truncated, response_body_truncated, request_body_file,
          response_body_file, request_body_decoded_size, response_body_decoded_size, stored_bytes, tls_mode,
          sni, tls_version, tls_cipher, error, bytes_up, bytes_down, resent_from, rule, imported, device, front_end,
          marker, comment, note, stream_id, connection_id, request_trailers, response_trailers
        ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                  ?, ?, ?, ?)
        """

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }

    /// Headers as stored: an array of name/value pairs. Written by hand:
    /// it runs twice per exchange on the event loop, and JSONSerialization
    /// cost a fifth of the tunnel's time.
    public static func encodeHeaders<Pairs: Sequence>(_ pairs: Pairs) -> String where Pairs.Element == (String, String) {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(256)
        var first = true
        for (name, value) in pairs {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "["))
            appendJSONString(name, to: &out)
            out.append(UInt8(ascii: ","))
            appendJSONString(value, to: &out)
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 8259 string escaping: quote, backslash and control characters.
    static func appendJSONString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        // Most names and values need no escape: copied whole.
        let plain = text.withUTF8 { bytes in
            guard !bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                return false
            }
            out.append(contentsOf: bytes)
            return true
        }
        if plain {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                out += [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func decodeHeaders(_ text: String?) -> [(String, String)] {
        guard let text, let array = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String]] else { return [] }
        return array.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }
}
