import Foundation

/// An exchange as the filter language's in-memory matcher sees it: a live
/// one (a rule deciding about a request, then its response) or a stored
/// row. Each field is what the store's column of the same meaning holds,
/// so a filter selects the same exchanges in memory as in SQL.
public struct FilterSubject: Sendable {
    public var method: String
    /// Absolute, as rows store it (the port only when not the scheme's default).
    public var url: String
    /// Lowercased.
    public var host: String
    /// `http`, `https`, `tcp` (a tunnel) or `dns`.
    public var scheme: String
    public var tls: CaptureFilter.TLS
    /// `HTTP/1.1`, `HTTP/2.0`… as rows store it; nil when not known.
    public var httpVersion: String?
    public var requestHeaders: [(String, String)] = []
    public var status: Int?
    /// nil while there is no response (`~q`).
    public var responseHeaders: [(String, String)]?
    /// Bodies as text, their Content-Encoding undone; nil when not at hand
    /// (a rule decides before a body streams).
    public var requestBody: String?
    public var responseBody: String?
    /// `address:port`, IPv6 in brackets.
    public var client: String?
    public var server: String?
    public var device: String?
    public var error: String?
    public var marker: String?
    public var comment: String?
    /// The rules that applied, comma-separated.
    public var rules: String?
    public var resent = false
    public var startedAt: Date

    public init(method: String, url: String, host: String, scheme: String, tls: CaptureFilter.TLS, startedAt: Date = Date()) {
        self.method = method
        self.url = url
        self.host = host
        self.scheme = scheme
        self.tls = tls
        self.startedAt = startedAt
    }

    /// A request for `url` alone (`busymate rules test URL`): no headers, no body.
    public init(url: String, method: String = "GET") {
        let scheme = url.range(of: "://").map { url[..<$0.lowerBound].lowercased() } ?? "https"
        let host = String(decoding: URLPattern.Subject(url).host, as: UTF8.self)
        self.init(method: method, url: url, host: host, scheme: scheme, tls: scheme == "https" ? .mitm : .none)
    }

    /// The first value of header `name` on one side.
    func header(_ name: String, in headers: [(String, String)]?) -> String? {
        headers?.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }
}
