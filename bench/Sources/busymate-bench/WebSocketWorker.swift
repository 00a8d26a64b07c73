import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import ProxyClient

/// One WebSocket's closed loop, confined to its event loop: TLS (after
/// CONNECT when there is a proxy), the upgrade, then `plan.webSocketWindow`
/// 1 KiB text messages in flight, each echo sending the next until the
/// deadline; then the last echoes are awaited and the socket ends with a
/// close frame. A message's latency is its round trip; one lost with its
/// connection, or echoed changed, is a failure.
final class WebSocketWorker: @unchecked Sendable {
    private let plan: LoadPlan
    private let loop: EventLoop
    private let deadline: NIODeadline
    private let finished: EventLoopPromise<LoadTally>
    private var tally = LoadTally()
    private var socket: Channel?
    /// When each message in flight was written, oldest first (echoes come back in order).
    private var sent = CircularBuffer<NIODeadline>()
    /// Bytes of an echo whose first fragments came.
    private var fragments = 0
    /// The socket's 101 came.
    private var upgradedSocket = false
    private var done = false
    private var graceTimer: Scheduled<Void>?
    private var handshakeTimer: Scheduled<Void>?
    /// How long after the deadline a worker waits for its last echoes.
    private static let grace = TimeAmount.seconds(30)
    /// How long a socket may take from connecting to its 101.
    private static let handshakeLimit = TimeAmount.seconds(10)
    static let payload = ByteBuffer(repeating: UInt8(ascii: "w"), count: 1024)
    /// SNI carries names only.
    private var serverName: String? { plan.host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : plan.host }

    init(plan: LoadPlan, loop: EventLoop, deadline: NIODeadline) {
        self.plan = plan
        self.loop = loop
        self.deadline = deadline
        finished = loop.makePromise()
    }

    func run() -> EventLoopFuture<LoadTally> {
        loop.execute { self.connect(first: true) }
        loop.execute {
            self.graceTimer = self.loop.scheduleTask(deadline: self.deadline + Self.grace) {
                guard !self.done else { return }
                self.count(
                    "echoes still missing \(Self.grace.nanoseconds / 1_000_000_000) s after the deadline", messages: max(1, self.sent.count)
                )
                self.finish()
            }
        }
        return finished.futureResult
    }

    /// The first connection is always made: a busy loop may start late.
    private func connect(first: Bool = false) {
        guard first || NIODeadline.now() < deadline else { return finish() }
        guard let tls = plan.tls else { return connectFailed(ProxyClientError(description: "the WebSocket cell needs TLS (wss)")) }
        let plan = self.plan
        let serverName = self.serverName
        let direct = plan.proxy == nil
        let target = plan.proxy ?? (plan.host, plan.port)
        ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .connect(host: target.0, port: target.1)
            .flatMap { channel -> EventLoopFuture<Channel> in
                let tunnel =
                    direct ? channel.eventLoop.makeSucceededVoidFuture() : ConnectPreamble.open("\(plan.host):\(plan.port)", on: channel)
                return tunnel.flatMapThrowing {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    let upgrader = NIOWebSocketClientUpgrader(
                        maxFrameSize: 1 << 20,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(EchoReader(self)) }
                        })
                    try sync.addHTTPClientHandlers(withClientUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                    try sync.addHandler(SocketWatcher(self))
                    let head = HTTPRequestHead(
                        version: .http1_1, method: .GET, uri: plan.path,
                        headers: ["Host": "\(plan.host):\(plan.port)", "User-Agent": "busymate-bench"])
                    channel.write(HTTPClientRequestPart.head(head), promise: nil)
                    channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
                    return channel
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
            .whenComplete { result in
                switch result {
                case let .success(channel) where channel.isActive:
                    self.socket = channel
                    self.fragments = 0
                    self.upgradedSocket = false
                    // A 101 that never comes (an origin or proxy that holds the request) fails the socket.
                    self.handshakeTimer = self.loop.scheduleTask(in: Self.handshakeLimit) {
                        guard channel === self.socket else { return }
                        self.tally.firstError =
                            self.tally.firstError ?? "no 101 within \(Self.handshakeLimit.nanoseconds / 1_000_000_000) s"
                        channel.close(promise: nil)
                    }
                case .success:
                    self.connectFailed(ProxyClientError(description: "the connection closed during its handshake"))
                case let .failure(error):
                    self.connectFailed(error)
                }
            }
    }

    /// The 101 came: the window fills.
    fileprivate func upgraded(_ channel: Channel) {
        guard channel === socket, !done else { return channel.close(promise: nil) }
        handshakeTimer?.cancel()
        upgradedSocket = true
        for _ in 0..<plan.webSocketWindow { write(on: channel) }
        channel.flush()
    }

    private func write(on channel: Channel) {
        sent.append(.now())
        channel.write(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: Self.payload), promise: nil)
    }

    /// An echo: its round trip counts, and before the deadline the next
    /// message goes (flushed with the read burst). After it, the last echo
    /// closes the socket. A fragmented echo counts at its last fragment.
    fileprivate func echoed(_ frame: WebSocketFrame, on channel: Channel) {
        guard channel === socket, !done else { return }
        guard frame.fin else {
            fragments += frame.data.readableBytes
            return
        }
        let whole = fragments == 0 ? frame.data == Self.payload : fragments + frame.data.readableBytes == Self.payload.readableBytes
        fragments = 0
        guard let at = sent.popFirst() else { return count("an echo of a message never sent", messages: 1) }
        if whole {
            tally.requests += 1
            tally.bodyBytes += frame.data.readableBytes
            tally.latencies.append(UInt32(clamping: (NIODeadline.now() - at).nanoseconds / 1000))
        } else {
            count("an echo unlike the message sent (\(frame.data.readableBytes) bytes in its last frame)", messages: 1)
        }
        if NIODeadline.now() < deadline {
            write(on: channel)
        } else if sent.isEmpty {
            var reason = channel.allocator.buffer(capacity: 2)
            reason.write(webSocketErrorCode: .normalClosure)
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: reason))
                .whenComplete { _ in self.finish() }
        }
    }

    /// The socket went: its messages in flight are lost (our own close
    /// comes only once none are), and before the deadline a new one opens
    /// shortly; after it the worker is done.
    fileprivate func closed(_ channel: Channel) {
        guard channel === socket, !done else { return }
        socket = nil
        handshakeTimer?.cancel()
        let before = NIODeadline.now() < deadline
        if !upgradedSocket {
            count("the socket closed before its 101", messages: 1)
        } else if before || !sent.isEmpty {
            count("the socket closed with \(sent.count) messages in flight", messages: before ? max(1, sent.count) : sent.count)
        }
        sent.removeAll()
        guard before else { return finish() }
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    /// The peer began the close: answered, and the socket ends (what was in flight is lost).
    fileprivate func peerClosed(_ frame: WebSocketFrame, on channel: Channel) {
        guard channel === socket else { return }
        channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: frame.unmaskedData))
            .whenComplete { _ in channel.close(promise: nil) }
    }

    /// A 101 refused: the response is the failure.
    fileprivate func refused(_ status: HTTPResponseStatus, on channel: Channel) {
        guard channel === socket else { return }
        tally.firstError = tally.firstError ?? "the upgrade was answered \(status.code)"
        channel.close(promise: nil)
    }

    fileprivate func failed(_ error: Error, on channel: Channel) {
        if NIODeadline.now() < deadline, tally.firstError == nil { tally.firstError = "\(error)" }
        channel.close(promise: nil)
    }

    private func connectFailed(_ error: Error) {
        guard NIODeadline.now() < deadline else { return finish() }
        count("\(error)", messages: 1)
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    private func count(_ error: String, messages: Int) {
        tally.failures += messages
        if tally.firstError == nil { tally.firstError = error }
    }

    private func finish() {
        guard !done else { return }
        done = true
        graceTimer?.cancel()
        handshakeTimer?.cancel()
        let old = socket
        socket = nil
        old?.close(promise: nil)
        finished.succeed(tally)
    }
}

/// Added at the 101, after NIO's frame decoder: each echo to the worker,
/// one flush per read burst.
private final class EchoReader: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame
    private let worker: WebSocketWorker

    init(_ worker: WebSocketWorker) { self.worker = worker }

    func handlerAdded(context: ChannelHandlerContext) { worker.upgraded(context.channel) }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary, .continuation: worker.echoed(frame, on: context.channel)
        case .ping:
            context.write(
                Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.unmaskedData)), promise: nil)
        case .connectionClose: worker.peerClosed(frame, on: context.channel)
        default: break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

    func errorCaught(context: ChannelHandlerContext, error: Error) { worker.failed(error, on: context.channel) }
}

/// From before the upgrade on: the connection's end, its errors before
/// the frame decoder, and an upgrade refused (NIO's upgrade handler passes
/// any other response on, and leaves).
private final class SocketWatcher: ChannelInboundHandler {
    typealias InboundIn = Any
    private let worker: WebSocketWorker

    init(_ worker: WebSocketWorker) { self.worker = worker }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case let .head(head)? = Self.unwrapInboundIn(data) as? HTTPClientResponsePart {
            return worker.refused(head.status, on: context.channel)
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        worker.failed(error, on: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        worker.closed(context.channel)
        context.fireChannelInactive()
    }
}
