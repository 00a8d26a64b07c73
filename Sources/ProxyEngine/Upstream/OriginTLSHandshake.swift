import BusymateShared
import NIOCore
import NIOSSL

/// The TLS part of an origin connection, put in by this one function for
/// every dial (a stream's own, and the eager one before the client's
/// handshake): the client handler first, the server's hello read as it
/// passes, and, when the origin's ALPN choice decides the layer, a watcher
/// for it. The handshake is bounded by `timeouts.tls_handshake_seconds`:
/// an origin that never answers it must not hold the dial.
enum OriginTLSHandshake {
    static func add(
        to channel: Channel, context: NIOSSLContext, host: String, alpn: EventLoopPromise<String?>?,
        hello: @escaping (TLSHello) -> Void
    ) throws {
        let ops = channel.pipeline.syncOperations
        // SNI carries names only, never IP literals.
        let serverName = IPAddressText.isLiteral(host) ? nil : host
        let client = try NIOSSLClientHandler(context: context, serverHostname: serverName)
        try ops.addHandler(client, position: .first)
        try ops.addHandler(TLSHelloSniffer(.server, found: hello), position: .first)
        if let alpn { try ops.addHandler(UpstreamALPNWatcher(promise: alpn), position: .after(client)) }
    }

    /// Fails `alpn` when the handshake has not said what the origin chose within `seconds`.
    @discardableResult
    static func bound(_ alpn: EventLoopPromise<String?>, seconds: Double, on eventLoop: EventLoop) -> Scheduled<Void> {
        let timer = eventLoop.scheduleTask(in: .milliseconds(Int64(seconds * 1000))) {
            alpn.fail(UpstreamHandshakeTimeout(seconds: seconds))
        }
        alpn.futureResult.whenComplete { _ in timer.cancel() }
        return timer
    }
}
