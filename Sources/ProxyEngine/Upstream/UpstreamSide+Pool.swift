import BusymateShared
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import NIOTLS

/// A stream of an HTTP/2 client goes through its connection's pool: an
/// origin HTTP/2 connection shared with its sibling streams, or a parked
/// HTTP/1.1 one.
extension UpstreamSide {
    func askPool() {
        guard let (dial, offer, pool) = pooledDial, case let .connecting(_, pending) = state, let first = pending.first else { return }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        switch pool.lookup(dial.key, waiter: { result in bound.value.pooled(dial, result) }) {
        case let .ready(connection): openStream(on: connection, key: dial.key, fresh: false)
        case .queued: break
        case .dial: connect(dial, first: first, offer: offer, pool: pool)
        case .http1:
            if let parked = pool.takeParked(dial.key) { adopt(parked, key: dial.key) } else { connect(dial, first: first, offer: nil) }
        }
    }

    /// Takes over an HTTP/1.1 connection another stream of this client left.
    func adopt(_ parked: UpstreamHTTP2Pool.Parked, key: Key) {
        guard case let .connecting(_, pending) = state else { return }
        parked.layer.handler.attach(self)
        retry.notOnAStream()
        hello = parked.hello
        report(.connected(server: parked.channel.remoteAddress))
        if key.secure { report(.tls(parked.hello, doneAt: nil)) }
        state = .connected(key, parked.channel, parked.layer)
        for part in pending { parked.channel.write(part, promise: nil) }
        parked.channel.flush()
        if pending.contains(where: { if case .end = $0 { true } else { false } }) { startTimer() }
        report(.ready)
    }

    /// One dial's particulars: where, through which proxy, to which address.
    struct Dial {
        let key: Key
        let proxy: UpstreamProxySetting?
        let override: String?
    }

    /// How HTTP/2 is offered to an origin, for a client that speaks it.
    enum HTTP2Offer {
        /// `h2` first in TLS's ALPN; the origin chooses.
        case alpn
        /// h2c with prior knowledge: no TLS, no negotiation.
        case priorKnowledge
    }

    /// HTTP/2 towards the origin only for an HTTP/2 client (`proxy.http2`):
    /// over TLS by ALPN; in plaintext only where the client's own h2c says
    /// the origin speaks it (a redirected connection, or a gRPC call).
    func http2Offer(_ key: Key, leg: HTTP2ClientLeg, request: UpstreamRequest) -> HTTP2Offer? {
        if key.secure {
            let tls: UpstreamTLS? = {
                if case let .intercepted(_, upstreamTLS) = route { upstreamTLS } else { services.interception.upstreamTLS }
            }()
            return tls?.http2 == true ? .alpn : nil
        }
        guard leg.priorKnowledge, !key.chained else { return nil }
        if case .transparent = route { return .priorKnowledge }
        let grpc = request.head.headers.first(name: "content-type")?.lowercased().hasPrefix("application/grpc") ?? false
        return grpc ? .priorKnowledge : nil
    }

    /// Another stream's dial for the pool ended.
    func pooled(_ dial: Dial, _ result: Result<UpstreamHTTP2Pool.Connection?, Error>) {
        guard case let .connecting(current, pending) = state, current == dial.key else { return }
        switch result {
        case let .success(connection?):
            openStream(on: connection, key: dial.key, fresh: false)
        case .success(nil):
            // The origin answered HTTP/1.1: a connection of this stream's own.
            guard let first = pending.first else { return }
            connect(dial, first: first, offer: nil)
        case let .failure(error):
            dialFailed(Self.dialFailure(dial.key.target, error))
        }
    }
}
