import NIOCore

/// An origin connection dialled before the client's TLS handshake
/// (mitmproxy's eager ALPN), so the client is offered what the origin
/// chose. It goes to the client's first exchange: an HTTP/2 client's pool
/// (`UpstreamHTTP2Pool.adoptEager`), or the first HTTP/1 exchange
/// (`UpstreamSide.begin`). One that is not wanted is closed unused.
/// Confined to the client connection's event loop.
struct EagerOrigin {
    enum Connection {
        /// The origin chose `h2`: NIO's HTTP/2 client is on it; `settled` once its SETTINGS came.
        case http2(UpstreamHTTP2Pool.Connection, settled: EventLoopFuture<Void>)
        /// The origin chose `http/1.1` or nothing: the HTTP/1 layer is on it, its handler detached.
        case http1(UpstreamHTTP2Pool.Parked)
    }

    /// Where it goes: the intercepted target, over TLS, never chained, to
    /// the address it was dialled to (a transparent connection's pin, a
    /// CONNECT's host_override).
    let key: UpstreamSide.Key
    let connection: Connection

    var channel: Channel {
        switch connection {
        case let .http2(connection, _): connection.channel
        case let .http1(parked): parked.channel
        }
    }

    var isHTTP2: Bool { if case .http2 = connection { true } else { false } }

    /// What a request must look like to take it over: the same target at the same address.
    func fits(_ key: UpstreamSide.Key) -> Bool {
        key == self.key && channel.isActive
    }

    func close() { channel.close(promise: nil) }
}
