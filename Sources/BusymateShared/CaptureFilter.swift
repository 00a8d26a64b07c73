import Foundation

/// A parsed filter: mitmproxy's filter language with Busymate's additions
/// (`../shared/DESIGN.md`, "Filters"). `CaptureFilter.parse` makes it from text;
/// the filter compiler turns it into SQL over the store, and `matches`
/// tests one exchange in memory (a rule's match).
public indirect enum CaptureFilter: Equatable, Sendable {
    case clause(Clause)
    case not(CaptureFilter)
    case and(CaptureFilter, CaptureFilter)
    case or(CaptureFilter, CaptureFilter)

    /// Which message of an exchange a header, body or content-type clause looks at.
    public enum Side: Equatable, Sendable {
        case either, request, response
    }

    public enum TLS: String, Equatable, Sendable, CaseIterable {
        case mitm, passthrough, none
    }

    /// `~proto`'s argument: the HTTP version the client spoke.
    public enum HTTPProtocol: String, Equatable, Sendable, CaseIterable {
        case h1, h2

        /// The `http_version` values (as rows store them) it selects.
        /// "HTTP/2" too: HAR files imported before HTTP/2 was captured stored that.
        public var versions: [String] {
            switch self {
            case .h1: return ["HTTP/1.0", "HTTP/1.1"]
            case .h2: return ["HTTP/2.0", "HTTP/2"]
            }
        }
    }

    /// One `~x` (or a bare word, which is `~u`). Patterns are regular
    /// expressions, matched case-insensitively, anywhere in the subject.
    public enum Clause: Equatable, Sendable {
        /// `~all`
        case all
        /// `~d`: the host.
        case domain(String)
        /// `~u` or a bare word: the URL as sent or percent-decoded.
        case url(String)
        /// `~m`
        case method(String)
        /// `~c`: a code, `4xx`, or `500-599`.
        case status(ClosedRange<Int>)
        /// `~h`, `~hq`, `~hs`: a header line, `Name: value`.
        case header(String, Side)
        /// `~b`, `~bq`, `~bs`: the decoded body, in the row or its file.
        case body(String, Side)
        /// `~t`, `~tq`, `~ts`: the Content-Type.
        case contentType(String, Side)
        /// `~e`: the exchange failed.
        case error
        /// `~q`: no response (yet).
        case noResponse
        /// `~src`, `~dst`: the client's and the server's address.
        case source(String)
        case destination(String)
        /// `~websocket`: a WebSocket handshake that switched.
        case websocket
        /// `~marked`: marked by a user (`busymate mark`, the page).
        case marked
        /// `~marker`: a mark that matches.
        case marker(String)
        /// `~comment`: a user's comment that matches.
        case comment(String)
        /// `~replay`, `~replayq`: resent from another exchange.
        case replay
        /// `~replays`: a response replayed by the proxy; Busymate replays none.
        case replayedResponse
        /// `~s`: has a response.
        case response
        /// `~a`: the response is an asset (CSS, JavaScript, an image, a font), as mitmproxy's.
        case asset
        /// `~http`: an HTTP exchange (not a DNS query, not a passed-through or opaque tunnel).
        case http
        /// `~tcp`: a passed-through or opaque TCP tunnel.
        case tcp
        /// `~udp`: a UDP flow; Busymate records none but DNS (`~dns`).
        case udp
        /// `~tls mitm|passthrough|none`
        case tls(TLS)
        /// `~rule NAME`: a rule that applied (a pattern over the names).
        case rule(String)
        /// `~device NAME`: the device that sent it (a pattern over names and addresses).
        case device(String)
        /// `~dns`: a DNS query the forwarder answered.
        case dns
        /// `~proto h1|h2`: the HTTP version the client spoke (`h1`: 1.0 or 1.1).
        case proto(HTTPProtocol)
        /// `~grpc`: a gRPC call (the request's Content-Type starts `application/grpc`).
        case grpc
        /// `~since`, `~until`: a time, or a duration ago (`10m`, `2h`, `1d`, `30s`).
        case since(Date)
        case until(Date)
    }
}

extension CaptureFilter {
    /// mitmproxy's assets (`~a`): JavaScript, CSS, images, fonts.
    public static let assetTypes = #"^\s*(text/javascript|application/(x-)?javascript|text/css|image/|font/|application/(x-)?font)"#
    /// What a gRPC request's Content-Type starts with (`application/grpc+proto`, `application/grpc-web` too), any case.
    public static let grpcType = "application/grpc"
}

/// Why a filter was refused, and where: `position` counts characters
/// from 1, as the message shows it (`~c 4x5: position 4: ...`).
public struct FilterError: Error, Equatable, CustomStringConvertible, Sendable {
    public var position: Int
    public var message: String
    public var description: String { "position \(position): \(message)" }
}
