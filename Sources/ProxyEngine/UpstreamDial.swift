import BusymateShared
import NIOCore
import NIOPosix
import ProxyClient

/// How one upstream connection is dialled: to the target itself, or to
/// `upstream_proxy` with a CONNECT through it. A proxy resolves names
/// itself, so a host_override applies only to a direct dial.
struct UpstreamDial {
    let target: ProxyTarget
    let proxy: UpstreamProxySetting?

    /// Where the TCP connection goes.
    var address: ProxyTarget { proxy.map { ProxyTarget(host: $0.host, port: $0.port) } ?? target }

    func resolver(override: String?, on eventLoop: EventLoop) -> Resolver & Sendable {
        UpstreamResolver.shared.resolver(host: address.host, port: address.port, on: eventLoop, override: proxy == nil ? override : nil)
    }

    /// Opens the tunnel to `target` on a channel connected to the proxy (at
    /// once when there is none); a refused CONNECT closes the channel.
    func tunnel(_ channel: Channel) -> EventLoopFuture<Void> {
        guard let proxy else { return channel.eventLoop.makeSucceededVoidFuture() }
        let headers = proxy.authorization.map { [("Proxy-Authorization", $0)] } ?? []
        return ConnectPreamble.open(target.description, headers: headers, on: channel).flatMapErrorThrowing { error in
            channel.close(promise: nil)
            throw error
        }
    }
}
