import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// What went wrong on an exchange, worded for the person reading the 502.
enum ProxyError: Error, CustomStringConvertible {
    /// No TLS client context (one could not be built from the settings).
    struct NoUpstreamTLS: Error, CustomStringConvertible {
        var description: String { "no TLS context for upstream servers (see ssl_proxying.upstream_trust)" }
    }

    case badTarget(String)
    case connectFailed(host: String, port: Int, underlying: Error)
    case upstreamClosedEarly
    /// The upstream connection broke after it was made (a reset, a timeout).
    case upstreamFailed(host: String, port: Int, underlying: Error)
    case upstreamTLS(host: String, port: Int, detail: String)
    case certificate(host: String, detail: String)
    case unsupported(String)
    case upstreamProtocol(String)
    /// No response head within `timeouts.upstream_response_seconds`.
    case upstreamTimedOut(host: String, port: Int, seconds: Double)

    var description: String {
        switch self {
        case let .badTarget(why): return why
        case let .connectFailed(host, port, underlying): return "cannot connect to \(host):\(port): \(Self.describe(underlying))"
        case .upstreamClosedEarly: return "the server closed the connection before it answered"
        case let .upstreamFailed(host, port, underlying): return "the connection to \(host):\(port) failed: \(Self.describe(underlying))"
        case let .upstreamTLS(host, port, detail):
            return
                "TLS with \(host):\(port) failed: \(detail) (to skip verification for this host, add it to ssl_proxying.insecure_upstream)"
        case let .certificate(host, detail): return "cannot make a certificate for \(host): \(detail)"
        case let .unsupported(what): return what
        case let .upstreamProtocol(what): return what
        case let .upstreamTimedOut(host, port, seconds):
            return
                "\(host):\(port) sent no response within \(TimeoutWords.format(seconds)) s of the request (timeouts.upstream_response_seconds)"
        }
    }

    var status: HTTPResponseStatus {
        switch self {
        case .badTarget, .unsupported: return .badRequest
        case .connectFailed, .upstreamClosedEarly, .upstreamFailed, .upstreamTLS, .certificate, .upstreamProtocol: return .badGateway
        case .upstreamTimedOut: return .gatewayTimeout
        }
    }

    /// BoringSSL's reason codes, readable: `CERTIFICATE_VERIFY_FAILED` →
    /// "certificate verify failed".
    static func describeTLS(_ error: Error) -> String {
        let text = "\(error)"
        var reasons: [String] = []
        var rest = text[...]
        while let range = rest.range(of: "OPENSSL_internal:") {
            let tail = rest[range.upperBound...]
            let code = tail.prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
            if !code.isEmpty { reasons.append(code.lowercased().replacingOccurrences(of: "_", with: " ")) }
            rest = tail
        }
        return reasons.isEmpty ? text : reasons.joined(separator: ", ")
    }

    static func describe(_ error: Error) -> String {
        if let io = error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
        if let nio = error as? NIOConnectionError {
            if let loop = (nio.dnsAError ?? nio.dnsAAAAError) as? SelfLoopError { return loop.description }
            if let dns = nio.dnsAAAAError ?? nio.dnsAError { return "DNS lookup failed: \(dns)" }
            if let first = nio.connectionErrors.first { return describe(first.error) }
            return "no address to connect to"
        }
        if let channelError = error as? ChannelError, case .connectTimeout = channelError { return "timed out" }
        return "\(error)"
    }
}
