import Foundation

/// `upstream_proxy` in `settings.json`: a proxy every upstream dial goes
/// through (an HTTP proxy: `CONNECT` for TLS and passthrough, absolute-form
/// for plain HTTP; a SOCKS5 proxy: a SOCKS5 CONNECT for everything), but
/// for hosts on `bypass`.
public struct UpstreamProxySetting: Sendable, Equatable {
    /// What the proxy speaks (`scheme` in settings.json).
    public enum Scheme: String, Sendable, CaseIterable {
        case http
        case socks5
    }

    public var scheme: Scheme
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var bypass: SSLProxyMatcher

    public init(scheme: Scheme = .http, host: String, port: Int, username: String? = nil, password: String? = nil, bypass: [String] = []) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.bypass = SSLProxyMatcher(include: bypass, exclude: [])
    }

    /// `Proxy-Authorization` for basic auth, when credentials are set (an HTTP proxy's).
    public var authorization: String? {
        guard scheme == .http, let username, let password else { return nil }
        return "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
    }

    /// Whether a dial to `host` goes through the proxy.
    public func carries(_ host: String) -> Bool { !bypass.shouldIntercept(host: host) }
}
