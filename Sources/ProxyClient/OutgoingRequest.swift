import BusymateShared
import CaptureStore
import Foundation

/// A request to send through the tunnel (`ResendClient`): a stored one,
/// changed or not, or a new one.
public struct OutgoingRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: Data
    /// "HTTP/2.0": sent again over HTTP/2, as the original was.
    public var httpVersion: String?

    public init(method: String, url: String, headers: [(String, String)], body: Data, httpVersion: String? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// Where the tunnel listens, from its status file (the bound address:
    /// the settings may say port 0); a wildcard address is reached on loopback.
    public static func proxyAddress(_ paths: GroupPaths) throws -> (host: String, port: Int) {
        guard let status = TunnelStatus.read(paths.status), ProcessProbe.isAlive(status.pid),
            let bound = status.listeners.compactMap(\.bound).first
        else {
            throw ProxyClientError(description: "the tunnel is not running (see `busymate status`)")
        }
        guard let colon = bound.lastIndex(of: ":"), let port = Int(bound[bound.index(after: colon)...]) else {
            throw ProxyClientError(description: "cannot read the listener address \(bound)")
        }
        var host = String(bound[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "0.0.0.0" { host = "127.0.0.1" }
        if host == "::" { host = "::1" }
        return (host, port)
    }

    /// An absolute http(s) URL, or nil.
    public static func isAbsoluteHTTP(_ url: String) -> Bool {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = parts.host, !host.isEmpty
        else { return false }
        return true
    }
}

extension OutgoingRequest {
    public init(_ record: ExchangeRecord, body: Data) {
        self.init(
            method: record.method, url: record.url, headers: ExchangeRecord.decodeHeaders(record.requestHeaders), body: body,
            httpVersion: record.httpVersion)
    }

    /// The request as a record for `ResendClient`: scheme, host, port and
    /// path from the URL, and a Host header that names it.
    public func record(requestID: String) throws -> ExchangeRecord {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), let host = parts.host else {
            throw ProxyClientError(description: "\(url): not an absolute URL")
        }
        let port = parts.port ?? (scheme == "https" ? 443 : 80)
        var path = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        if let query = parts.percentEncodedQuery { path += "?" + query }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        var record = ExchangeRecord(
            startedAt: Date(), scheme: scheme, method: method, host: bare.lowercased(), port: port, path: path,
            url: url, tlsMode: scheme == "https" ? .mitm : .none)
        record.requestID = requestID
        record.httpVersion = httpVersion
        let authority = (bare.contains(":") ? "[\(bare)]" : bare) + (parts.port.map { ":\($0)" } ?? "")
        var headers = self.headers
        if let at = headers.firstIndex(where: { $0.0.caseInsensitiveCompare("host") == .orderedSame }) {
            headers[at].1 = authority
        } else {
            headers.insert(("Host", authority), at: 0)
        }
        record.requestHeaders = ExchangeRecord.encodeHeaders(headers)
        return record
    }
}
