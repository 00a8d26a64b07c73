import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import ProxyClient

/// One HTTP/2 connection's closed loop, confined to its event loop: TLS
/// with ALPN h2 (after CONNECT when there is a proxy), `plan.streams`
/// streams open at once, each one request whose end opens the next. A
/// response that ends after the deadline still counts, as on HTTP/1.
final class HTTP2Worker: @unchecked Sendable {
    private let plan: LoadPlan
    private let loop: EventLoop
    private let deadline: NIODeadline
    private let finished: EventLoopPromise<LoadTally>
    private var tally = LoadTally()
    private var connection: Channel?
    private var multiplexer: NIOHTTP2Handler.StreamMultiplexer?
    /// Streams asked for and neither ended nor lost yet.
    private var open = 0
    private var done = false
    private let request: HTTPRequestHead
    /// SNI carries names only.
    private var serverName: String? { plan.host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : plan.host }

    init(plan: LoadPlan, loop: EventLoop, deadline: NIODeadline) {
        self.plan = plan
        self.loop = loop
        self.deadline = deadline
        finished = loop.makePromise()
        // The codec turns Host into :authority.
        request = HTTPRequestHead(version: HTTPVersion(major: 2, minor: 0), method: .GET, uri: plan.path,
                                  headers: HTTPHeaders([("Host", "\(plan.host):\(plan.port)"), ("User-Agent", "busymate-bench")]))
    }

    func run() -> EventLoopFuture<LoadTally> {
        loop.execute { self.connect(first: true) }
        return finished.futureResult
    }

    /// The first connection is always made: a busy loop may start late.
    private func connect(first: Bool = false) {
        guard first || NIODeadline.now() < deadline else { return finish() }
        let plan = self.plan
        let serverName = self.serverName
        guard let tls = plan.tls else { return connectFailed(ProxyClientError(description: "HTTP/2 cells need TLS (ALPN h2)")) }
        let direct = plan.proxy == nil
        let target = plan.proxy ?? (plan.host, plan.port)
        ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .connect(host: target.0, port: target.1)
            .flatMap { channel -> EventLoopFuture<Channel> in
                let tunnel = direct ? channel.eventLoop.makeSucceededVoidFuture() : ConnectPreamble.open("\(plan.host):\(plan.port)", on: channel)
                return tunnel.flatMapThrowing {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    try sync.addHandler(ConnectionWatcher(self))
                    let http2 = NIOHTTP2Handler(mode: .client, eventLoop: channel.eventLoop) { $0.close() }
                    try sync.addHandler(http2)
                    self.multiplexer = try http2.syncMultiplexer()
                    return channel
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
            .whenComplete { result in
                switch result {
                case let .success(channel) where channel.isActive:
                    self.connection = channel
                    for _ in 0..<plan.streams { self.openStream() }
                case .success:
                    self.multiplexer = nil
                    self.connectFailed(ProxyClientError(description: "the connection closed during its handshake"))
                case let .failure(error):
                    self.multiplexer = nil
                    self.connectFailed(error)
                }
            }
    }

    /// The next request, on a stream of its own.
    private func openStream() {
        guard !done, let multiplexer, let connection, NIODeadline.now() < deadline else { return finishIfIdle() }
        open += 1
        let request = self.request
        multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandlers([
                    HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: .https), StreamReader(self, on: connection),
                ])
            }
        }.whenComplete { result in
            switch result {
            case let .success(stream):
                stream.write(HTTPClientRequestPart.head(request), promise: nil)
                stream.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            case let .failure(error):
                self.streamLost(error, on: connection)
            }
        }
    }

    fileprivate func body(_ bytes: Int) { tally.bodyBytes += bytes }

    fileprivate func streamEnded(status: UInt, since started: NIODeadline) {
        open -= 1
        let micros = (NIODeadline.now() - started).nanoseconds / 1000
        if status == 200 {
            tally.requests += 1
            tally.latencies.append(UInt32(clamping: micros))
        } else {
            count("status \(status)")
        }
        openStream()
    }

    /// A stream reset or cut off with its connection: that request failed.
    fileprivate func streamLost(_ error: Error, on connection: Channel) {
        open -= 1
        if NIODeadline.now() < deadline { count("\(error)") }
        if connection === self.connection && connection.isActive { openStream() } else { finishIfIdle() }
    }

    /// The connection went: its streams report themselves lost; a new one
    /// opens shortly, as an HTTP/1 worker's would.
    fileprivate func connectionClosed(_ channel: Channel) {
        guard channel === connection, !done else { return }
        connection = nil
        multiplexer = nil
        guard NIODeadline.now() < deadline else { return finishIfIdle() }
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    /// The cause, named first: the streams it cuts off report after it.
    fileprivate func connectionRefused(_ reason: String) {
        tally.failures += 1
        tally.firstError = reason
        connection?.close(promise: nil)
    }

    /// A TLS or HTTP/2 error on the connection: named as the cause of the
    /// streams it cuts off (which count the failed requests).
    fileprivate func connectionError(_ error: Error) {
        guard NIODeadline.now() < deadline else { return }
        tally.firstError = "\(error)"
    }

    private func connectFailed(_ error: Error) {
        guard NIODeadline.now() < deadline else { return finish() }
        count("\(error)")
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    private func count(_ error: String) {
        tally.failures += 1
        if tally.firstError == nil { tally.firstError = error }
    }

    private func finishIfIdle() {
        if open == 0 && NIODeadline.now() >= deadline { finish() }
    }

    private func finish() {
        guard !done else { return }
        done = true
        let old = connection
        connection = nil
        multiplexer = nil
        old?.close(promise: nil)
        finished.succeed(tally)
    }
}

/// Between TLS and HTTP/2: the connection must have agreed on h2, and its
/// end is the worker's to handle.
private final class ConnectionWatcher: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let worker: HTTP2Worker

    init(_ worker: HTTP2Worker) { self.worker = worker }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case let .handshakeCompleted(negotiatedProtocol) = tls, negotiatedProtocol != "h2" {
            worker.connectionRefused("ALPN: the server chose \(negotiatedProtocol ?? "nothing"), not h2")
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        worker.connectionError(error)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        worker.connectionClosed(context.channel)
        context.fireChannelInactive()
    }
}

/// One stream's response: its status, its body's size, its end.
private final class StreamReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    private let worker: HTTP2Worker
    private let connection: Channel
    private let started = NIODeadline.now()
    private var status: UInt = 0
    private var over = false

    init(_ worker: HTTP2Worker, on connection: Channel) {
        self.worker = worker
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(head): status = head.status.code
        case let .body(buffer): worker.body(buffer.readableBytes)
        case .end:
            guard !over else { return }
            over = true
            worker.streamEnded(status: status, since: started)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        lost(ProxyClientError(description: "the stream closed mid-response"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        lost(error)
        context.close(promise: nil)
    }

    private func lost(_ error: Error) {
        guard !over else { return }
        over = true
        worker.streamLost(error, on: connection)
    }
}
