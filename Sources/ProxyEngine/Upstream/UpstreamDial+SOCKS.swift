import BusymateShared
import NIOCore

/// `upstream_proxy` with `"scheme": "socks5"`.
extension UpstreamDial {
    /// Opens the tunnel to `target` through the SOCKS5 proxy on `channel`
    /// (`SOCKS5ClientHandshake`), within `connectDeadline`; as with an HTTP
    /// proxy, bytes the server sends at once wait in the tunnel's `early`
    /// handler and a refusal closes the channel with words a user can act on.
    func socksTunnel(_ channel: Channel, proxy: UpstreamProxySetting) -> EventLoopFuture<Tunnel> {
        let promise = channel.eventLoop.makePromise(of: Void.self)
        let target = target
        return channel.eventLoop.flatSubmit { () -> EventLoopFuture<Tunnel> in
            let ops = channel.pipeline.syncOperations
            let handshake = SOCKS5ClientHandshake(target: target, username: proxy.username, password: proxy.password, promise: promise)
            let early = EarlyBytes()
            let options = channel.syncOptions
            let autoRead = (try? options?.getOption(.autoRead)) ?? true
            let timer = channel.eventLoop.scheduleTask(in: Self.connectDeadline) {
                promise.fail(
                    SOCKS5ClientHandshake.Refusal(
                        description: "did not answer within \(Self.connectDeadline.nanoseconds / 1_000_000_000) s"))
            }
            do {
                try options?.setOption(.autoRead, value: true)
                try ops.addHandler(handshake, position: .first)
                try ops.addHandler(early, position: .last)
            } catch {
                promise.fail(error)
            }
            let bound = NIOLoopBound((handshake, early), eventLoop: channel.eventLoop)
            return promise.futureResult.flatMap { () -> EventLoopFuture<Void> in
                timer.cancel()
                try? channel.syncOptions?.setOption(.autoRead, value: autoRead)
                let gone = channel.eventLoop.makePromise(of: Void.self)
                channel.pipeline.syncOperations.removeHandler(bound.value.0, promise: gone)
                return gone.futureResult
            }.map {
                Tunnel(early: NIOLoopBound(bound.value.1, eventLoop: channel.eventLoop), channel: channel)
            }.flatMapErrorThrowing { error in
                timer.cancel()
                channel.close(promise: nil)
                let why = (error as? SOCKS5ClientHandshake.Refusal)?.description ?? "failed: \(error)"
                throw UpstreamProxyRefusal(description: "the upstream SOCKS5 proxy \(why) (CONNECT \(target))")
            }
        }
    }
}
