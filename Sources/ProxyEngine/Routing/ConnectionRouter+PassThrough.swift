import BusymateShared
import Logging
import NIOCore
import NIOHTTP1

/// Passing the bytes through: one row for the tunnel, a dial (SOCKS5's is
/// open already), a CONNECT's answer, and the glue.
extension ConnectionRouter {
    /// Glues the client to `target`, named so in the row. A CONNECT is
    /// answered once the dial has come (200, or an error and a close).
    func dial(_ target: ProxyTarget, context: ChannelHandlerContext) {
        state = .dialling
        let head = connectHead ?? HTTPRequestHead(version: .http1_1, method: .CONNECT, uri: target.description)
        tunnelCapture = hooks.tunnelOpened(head, target: target, client: context.channel.remoteAddress)
        var address = pinned
        if let connect = connectHead {
            // The explicit proxy's host_override rules: a redirected connection's dials are pinned already.
            let override = owner.passThroughOverride(for: target, headers: connect.headers)
            if let override { tunnelCapture?.rule(override.rule) }
            address = override?.address
        } else if let rule = socksRule {
            tunnelCapture?.rule(rule)
        }
        if let (peer, tunnel) = dialled {
            dialled = nil
            glue(peer, tunnel: tunnel, context: context)
            return
        }
        owner.dialPassThrough(target, override: address) { [self] result in
            guard let context = self.context else { return }
            switch result {
            case let .success((peer, tunnel)): glue(peer, tunnel: tunnel, context: context)
            case let .failure(error): dialFailed(error, context: context)
            }
        }
    }

    private func dialFailed(_ error: Error, context: ChannelHandlerContext) {
        let failure = ProxyError.connectFailed(host: original.host, port: original.port, underlying: error)
        tunnelCapture?.failed(failure.description)
        tunnelCapture = nil
        guard connectHead != nil else {
            logger.notice("cannot reach the original destination", metadata: ["ERROR": "\(error)"])
            close(context)
            return
        }
        logger.notice("CONNECT failed", metadata: ["ERROR": "\(failure)"])
        refuse(failure, context: context)
    }

    private func glue(_ peer: Channel, tunnel: UpstreamDial.Tunnel, context: ChannelHandlerContext) {
        if connectHead != nil {
            writeEstablished(context: context)
            tunnelCapture?.established()
        }
        state = .handingOver
        do {
            try owner.passThrough(to: peer, tunnel: tunnel, row: tunnelCapture, replacing: self)
            logger.debug("glued", metadata: ["SERVER": "\(peer.remoteAddress.map { "\($0)" } ?? "?")"])
        } catch {
            peer.close(mode: .all, promise: nil)
            close(context)
        }
    }

    // MARK: a CONNECT's answers

    /// A CONNECT refused or failed: its error reply, and a close.
    func refuse(_ failure: ProxyError, context: ChannelHandlerContext) {
        state = .closed
        ProxyReply.write(failure.status, "Busymate: \(failure)", close: true, context: context, wrap: Self.wrapOutboundOut)
        owner.connectRefused()
    }

    func writeEstablished(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Via", value: "1.1 \(LoopGuard.shared.pseudonym)")
        let head = HTTPResponseHead(version: .http1_1, status: .custom(code: 200, reasonPhrase: "Connection Established"), headers: headers)
        context.write(Self.wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }
}
