import Foundation
import NIOCore
import NIOHTTP1

/// What the upstream side reports to its exchange: the only way it speaks
/// to it. The exchange decides what each means for the client.
enum UpstreamEvent {
    /// A connection (or a stream on an origin's HTTP/2 connection) is the exchange's now.
    case connected(server: SocketAddress?)
    /// What the server chose in TLS; `doneAt`: when its handshake ended (nil: on a connection made earlier).
    case tls(TLSHello?, doneAt: Date?)
    case response(HTTPClientResponsePart)
    /// A read burst from the server ended: what went to the client can be flushed.
    case readComplete
    /// Parts can be sent again (the dial ended, or the server took what it was sent).
    case ready
    /// The dial failed: nothing reached the server.
    case failed(ProxyError)
    /// The connection in use closed (`error`: why, when it failed).
    case closed(ProxyTarget, Error?)
    /// No response head within `timeouts.upstream_response_seconds` of the request's end.
    case timedOut(ProxyError)
}
