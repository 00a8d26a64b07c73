import NIOCore

/// Opens a tunnel through an upstream SOCKS5 proxy (RFC 1928), with
/// username/password authentication (RFC 1929) when credentials are set:
/// greeting → method → (credentials) → CONNECT → reply. swift-nio-extras'
/// `SOCKSClientHandler` offers "no authentication" only, hence this one.
/// Names go as names (socks5h: the proxy resolves them). Bytes after the
/// reply are handed on as it leaves; `promise` says how it ended.
final class SOCKS5ClientHandshake {
    private enum State: Equatable {
        case greeting
        case authenticating
        case connecting
        case established
        case failed
    }

    /// Why the proxy would not open the tunnel, in words a user can act on.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    private var state = State.greeting
    private let target: ProxyTarget
    private let credentials: (username: String, password: String)?
    private let promise: EventLoopPromise<Void>
    private var buffer = ByteBuffer()
    private var greeted = false

    init(target: ProxyTarget, username: String?, password: String?, promise: EventLoopPromise<Void>) {
        self.target = target
        credentials = username.flatMap { user in password.map { (user, $0) } }
        self.promise = promise
    }
}

extension SOCKS5ClientHandshake: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { greet(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        greet(context: context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        advance(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(Refusal(description: "closed the connection before answering"), context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        fail(error, context: context)
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        if buffer.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(buffer))
            buffer.clear()
            context.fireChannelReadComplete()
        }
        context.leavePipeline(removalToken: removalToken)
    }

    // MARK: the handshake

    private func greet(context: ChannelHandlerContext) {
        guard state == .greeting, !greeted else { return }
        greeted = true
        // Offer only what we can do: credentials when set, else none.
        let method: UInt8 = credentials == nil ? SOCKS5Message.noAuthentication : 0x02
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [SOCKS5Message.version, 1, method])), promise: nil)
    }

    private func advance(context: ChannelHandlerContext) {
        let view = buffer.readableBytesView
        switch state {
        case .greeting:
            guard view.count >= 2 else { return }
            let chosen = view[view.startIndex + 1]
            buffer.moveReaderIndex(forwardBy: 2)
            guard view.first == SOCKS5Message.version else { return fail(Refusal(description: "does not speak SOCKS5"), context: context) }
            switch chosen {
            case SOCKS5Message.noAuthentication where credentials == nil:
                request(context: context)
            case 0x02 where credentials != nil:
                authenticate(context: context)
            default:
                let why =
                    credentials == nil
                    ? "asks for authentication (set upstream_proxy.username and password)"
                    : "accepts none of the methods offered (username/password)"
                fail(Refusal(description: why), context: context)
            }
        case .authenticating:
            guard view.count >= 2 else { return }
            let status = view[view.startIndex + 1]
            buffer.moveReaderIndex(forwardBy: 2)
            guard status == 0x00 else {
                return fail(
                    Refusal(description: "refused the user name and password (check upstream_proxy.username and password)"),
                    context: context)
            }
            request(context: context)
        case .connecting:
            guard view.count >= 5 else { return }
            let (ver, rep, atyp) = (view[view.startIndex], view[view.startIndex + 1], view[view.startIndex + 3])
            let address: Int
            switch atyp {
            case 0x01: address = 4
            case 0x04: address = 16
            case 0x03: address = 1 + Int(view[view.startIndex + 4])
            default: return fail(Refusal(description: "answered with address type \(atyp)"), context: context)
            }
            guard view.count >= 4 + address + 2 else { return }
            buffer.moveReaderIndex(forwardBy: 4 + address + 2)
            guard ver == SOCKS5Message.version, rep == SOCKS5Message.Reply.succeeded.rawValue else {
                let name = SOCKS5Message.Reply(rawValue: rep)?.text ?? "an unknown code"
                return fail(Refusal(description: String(format: "refused it: 0x%02x (%@)", rep, name)), context: context)
            }
            state = .established
            promise.succeed()
        case .established, .failed:
            return
        }
    }

    private func authenticate(context: ChannelHandlerContext) {
        guard let (username, password) = credentials else { return }
        state = .authenticating
        // RFC 1929: VER 1, ULEN UNAME, PLEN PASSWD (lengths checked in settings).
        var out = ByteBuffer(bytes: [0x01, UInt8(truncatingIfNeeded: username.utf8.count)])
        out.writeString(username)
        out.writeInteger(UInt8(truncatingIfNeeded: password.utf8.count))
        out.writeString(password)
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    private func request(context: ChannelHandlerContext) {
        state = .connecting
        var out = ByteBuffer(bytes: [SOCKS5Message.version, 0x01, 0x00])
        if let address = try? SocketAddress(ipAddress: target.host, port: target.port) {
            let reply = SOCKS5Message.reply(.succeeded, bound: address)
            // The same shape as a reply's address: ATYP, address, port.
            out.writeImmutableBuffer(reply.getSlice(at: reply.readerIndex + 3, length: reply.readableBytes - 3) ?? ByteBuffer())
        } else {
            let name = Array(target.host.utf8.prefix(255))
            out.writeInteger(UInt8(0x03))
            out.writeInteger(UInt8(name.count))
            out.writeBytes(name)
            out.writeInteger(UInt16(target.port))
        }
        context.writeAndFlush(wrapOutboundOut(out), promise: nil)
    }

    private func fail(_ error: Error, context: ChannelHandlerContext) {
        guard state != .established, state != .failed else { return }
        state = .failed
        promise.fail(error)
        context.close(promise: nil)
    }
}
