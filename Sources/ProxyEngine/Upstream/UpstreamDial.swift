import BusymateShared
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix

/// How one upstream connection is dialled: to the target itself, or to
/// `upstream_proxy` with a CONNECT through it (HTTP or SOCKS5). A proxy resolves names
/// itself, so a host_override applies only to a direct dial.
struct UpstreamDial {
    let target: ProxyTarget
    let proxy: UpstreamProxySetting?

    /// Where the TCP connection goes.
    var address: ProxyTarget { proxy.map { ProxyTarget(host: $0.host, port: $0.port) } ?? target }

    func resolver(override: String?, on eventLoop: EventLoop) -> Resolver & Sendable {
        UpstreamResolver.shared.resolver(host: address.host, port: address.port, on: eventLoop, override: proxy == nil ? override : nil)
    }

    static let connectDeadline = TimeAmount.seconds(10)

    /// Opens the tunnel to `target` through the proxy on `channel` (at once
    /// when there is none) with swift-nio-extras' `NIOHTTP1ProxyConnectHandler`;
    /// a refused CONNECT closes the channel. The future succeeds once the
    /// proxy's HTTP handlers have left (nothing may write raw bytes through
    /// them); bytes the server sent right after the proxy's 200 wait in the
    /// tunnel's `early` handler for whatever reads the tunnel.
    func tunnel(_ channel: Channel) -> EventLoopFuture<Tunnel> {
        guard let proxy else { return channel.eventLoop.makeSucceededFuture(Tunnel(early: nil)) }
        if proxy.scheme == .socks5 { return socksTunnel(channel, proxy: proxy) }
        let promise = channel.eventLoop.makePromise(of: Void.self)
        let headers = HTTPHeaders(proxy.authorization.map { [("Proxy-Authorization", $0)] } ?? [])
        let (target, deadline) = (target, NIODeadline.now() + Self.connectDeadline)
        return channel.eventLoop.flatSubmit { () -> EventLoopFuture<Tunnel> in
            let ops = channel.pipeline.syncOperations
            let encoder = HTTPRequestEncoder()
            let decoder = ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes))
            let connect = NIOHTTP1ProxyConnectHandler(
                targetHost: target.host, targetPort: target.port, headers: headers, deadline: deadline, promise: promise)
            let early = EarlyBytes()
            // The proxy's answer must be read whatever the caller's reads: on for it, as they were after.
            let options = channel.syncOptions
            let autoRead = (try? options?.getOption(.autoRead)) ?? true
            do {
                try options?.setOption(.autoRead, value: true)
                // In this order at the front: the CONNECT goes out through the encoder.
                try ops.addHandler(encoder, position: .first)
                try ops.addHandler(decoder, position: .after(encoder))
                try ops.addHandler(connect, position: .after(decoder))
                try ops.addHandler(early, position: .last)
            } catch {
                promise.fail(error)
            }
            let bound = NIOLoopBound((encoder, decoder, early), eventLoop: channel.eventLoop)
            return promise.futureResult.flatMap { () -> EventLoopFuture<Void> in
                let (encoder, decoder, _) = bound.value
                let ops = channel.pipeline.syncOperations
                try? channel.syncOptions?.setOption(.autoRead, value: autoRead)
                ops.removeHandler(encoder, promise: nil)
                // NIO's decoder leaves on the next tick, handing on what it holds.
                let gone = channel.eventLoop.makePromise(of: Void.self)
                ops.removeHandler(decoder, promise: gone)
                return gone.futureResult
            }.map {
                Tunnel(early: NIOLoopBound(bound.value.2, eventLoop: channel.eventLoop), channel: channel)
            }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw Self.explain(error, target: target)
            }
        }
    }

    /// The proxy's refusal in words a user can act on.
    static func explain(_ error: Error, target: ProxyTarget) -> Error {
        guard let failure = error as? NIOHTTP1ProxyConnectHandler.Error else { return error }
        let why: String
        switch failure {
        case .proxyAuthenticationRequired():
            why = "answered 407 Proxy Authentication Required (check upstream_proxy.username and password)"
        case .httpProxyHandshakeTimeout():
            why = "did not answer within \(connectDeadline.nanoseconds / 1_000_000_000) s"
        case .remoteConnectionClosed(), .channelUnexpectedlyInactive():
            why = "closed the connection before answering"
        default:
            // The library's text names its own source line: keep what precedes it.
            why = "refused it: \(failure.description.split(separator: " (").first.map(String.init) ?? failure.description)"
        }
        return UpstreamProxyRefusal(description: "the upstream proxy \(why) (CONNECT \(target))")
    }

    /// An open tunnel through the proxy.
    struct Tunnel: Sendable {
        let early: NIOLoopBound<EarlyBytes>?
        var channel: Channel?

        init(early: NIOLoopBound<EarlyBytes>?, channel: Channel? = nil) {
            self.early = early
            self.channel = channel
        }

        /// The handler that reads the tunnel is in place: the early bytes go to it.
        func finish() {
            guard let early, let ops = channel?.pipeline.syncOperations else { return }
            ops.removeHandler(early.value, promise: nil)
        }
    }
}
