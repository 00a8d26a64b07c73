import NIOCore
import NIOHTTP1

// MARK: what is no HTTP exchange

extension ExchangeHooks {
    /// A CONNECT that is passed through: counted, and its row follows it
    /// (`TunnelCapture`: opened, failed, closed).
    func tunnelOpened(_ head: HTTPRequestHead, target: ProxyTarget, client: SocketAddress?) -> TunnelCapture? {
        hookList.stats.requestStarted()
        return hookList.capture?.tunnel(head, target: target, client: client, peer: services.peer)
    }

    /// A passed-through tunnel whose sides have both closed.
    func tunnelClosed(_ tunnel: TunnelCapture?, counts: TunnelByteCounts) {
        tunnel?.closed(counts)
    }

    /// A CONNECT that is intercepted: counted (its requests are exchanges of their own).
    func tunnelIntercepted() { hookList.stats.requestStarted() }

    /// The client's TLS handshake with an intercepting leaf failed.
    func handshakeRefused(_ target: ProxyTarget, sni: String?, client: SocketAddress?, why: String) {
        hookList.capture?.handshakeFailed(target, sni: sni, client: client, why: why, peer: services.peer)
    }

    /// A refusal pinned `host` (passed through from now on): the pin goes to
    /// the store through the capture sink, off the event loop.
    func hostPinned(_ host: String, reason: String) {
        hookList.capture?.writer.recordPin(host, reason: reason)
    }

    /// A request the decoder refused before it parsed whole.
    func requestRefused(
        line: (method: String, target: String)?, intercepted target: ProxyTarget?, client: SocketAddress?,
        status: HTTPResponseStatus, why: String, answer: LocalResponse?
    ) {
        hookList.capture?.requestRefused(
            line: line, intercepted: target, client: client, status: status, why: why, answer: answer, peer: services.peer)
    }

    /// A SOCKS5 handshake refused, broken off or whose target could not be dialled.
    func socksRefused(_ target: ProxyTarget?, client: SocketAddress?, why: String) {
        hookList.capture?.socksRefused(target, client: client, why: why, peer: services.peer)
    }

    /// A request head that did not arrive whole in time.
    func requestHeadTimedOut(intercepted target: ProxyTarget?, client: SocketAddress?, why: String) {
        hookList.capture?.requestHeadTimedOut(intercepted: target, client: client, why: why, peer: services.peer)
    }
}
