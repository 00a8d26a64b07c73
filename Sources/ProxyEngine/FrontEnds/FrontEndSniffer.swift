import NIOCore

/// The first handler of an explicit-proxy or device-port connection: its
/// first byte says how the client speaks. 0x05 is SOCKS5 (RFC 1928); an
/// HTTP method starts with a letter. It holds what it read until it has
/// decided, then leaves, handing the bytes on to the layer that follows:
/// the HTTP layer already in place, the SOCKS5 handshake in its stead, or
/// the HTTP/2 layer for a client that opens with h2c's preface.
final class FrontEndSniffer {
    private enum State {
        case waiting
        case decided
    }

    private var state = State.waiting
    private let owner: ProxyPipeline
    private var held: [NIOAny] = []
    /// What came so far, to tell the h2c preface from an HTTP/1 method.
    private var seen = ByteBuffer()
    private var inputClosed = false

    init(owner: ProxyPipeline) { self.owner = owner }
}

extension FrontEndSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .waiting = state else {
            held.append(data)
            return
        }
        var bytes = unwrapInboundIn(data)
        held.append(data)
        seen.writeBuffer(&bytes)
        guard let first = seen.getInteger(at: seen.readerIndex, as: UInt8.self) else { return }
        let h2c = owner.services.interception.http2 ? H2CPreface.matches(seen) : false
        if h2c == nil { return }
        state = .decided
        seen = ByteBuffer()
        do {
            if first == SOCKS5Message.version {
                try owner.startSOCKS(replacing: self)
            } else if h2c == true {
                try owner.startH2C(replacing: self)
            } else {
                context.pipeline.syncOperations.removeHandler(self, promise: nil)
            }
        } catch {
            owner.services.logger.error("cannot set up the connection's layer", metadata: ["ERROR": "\(error)"])
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, !held.isEmpty || state == .decided {
            inputClosed = true
            // No more bytes will come to tell h2c from HTTP/1: the HTTP layer answers what came.
            if case .waiting = state {
                state = .decided
                context.pipeline.syncOperations.removeHandler(self, promise: nil)
            }
            return
        }
        // Closed before a byte: the HTTP layer sees it as before.
        context.fireUserInboundEventTriggered(event)
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        let later = held
        held = []
        for data in later { context.fireChannelRead(data) }
        if !later.isEmpty { context.fireChannelReadComplete() }
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        context.leavePipeline(removalToken: removalToken)
    }
}
