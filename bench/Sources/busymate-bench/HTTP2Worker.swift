import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import ProxyClient

/// One HTTP/2 connection's closed loop, confined to its event loop: TLS
/// with ALPN h2 (after CONNECT when there is a proxy), `plan.streams`
/// streams open at once, each one request whose end opens the next
/// (`HTTP2FrameClient`). A response that ends after the deadline still
/// counts, as on HTTP/1.
final class HTTP2Worker: @unchecked Sendable {
    private let plan: LoadPlan
    private let loop: EventLoop
    private let deadline: NIODeadline
    private let finished: EventLoopPromise<LoadTally>
    private var tally = LoadTally()
    private var connection: Channel?
    private var client: HTTP2FrameClient?
    /// The connection's failure is counted already (ALPN refused).
    private var connectionCounted = false
    private var done = false
    /// How long after the deadline a worker waits for its last responses.
    private static let grace = TimeAmount.seconds(30)
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
        // A server that never answers (or never lets a stream start) must not hold the run.
        loop.scheduleTask(deadline: deadline + Self.grace) {
            guard !self.done else { return }
            self.count("responses still open \(Self.grace.nanoseconds / 1_000_000_000) s after the deadline")
            self.finish()
        }
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
        let events = HTTP2FrameClient.Events(
            ended: { status, started in self.streamEnded(status: status, since: started) },
            lost: { reason in self.streamLost(reason) },
            body: { bytes in self.tally.bodyBytes += bytes },
            mayStart: { !self.done && NIODeadline.now() < self.deadline },
            drained: { self.finish() })
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
                    let client = try HTTP2FrameClient(
                        authority: "\(plan.host):\(plan.port)", path: plan.path, streams: plan.streams, events: events)
                    try sync.addHandler(client)
                    try sync.addHandler(ConnectionWatcher(self))
                    self.client = client
                    self.connectionCounted = false
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
                case .success:
                    self.connectFailed(ProxyClientError(description: "the connection closed during its handshake"))
                case let .failure(error):
                    self.connectFailed(error)
                }
            }
    }

    private func streamEnded(status: UInt, since started: NIODeadline) {
        let micros = (NIODeadline.now() - started).nanoseconds / 1000
        if status == 200 {
            tally.requests += 1
            tally.latencies.append(UInt32(clamping: micros))
        } else {
            count("status \(status)")
        }
    }

    /// A stream reset or cut off with its connection: that request failed.
    private func streamLost(_ reason: String) {
        if NIODeadline.now() < deadline { count(reason) }
    }

    /// The connection went (its streams reported lost first): after the
    /// deadline the worker is done, before it a new one opens shortly, as
    /// an HTTP/1 worker's would. One that never began HTTP/2 (its TLS
    /// handshake failed, or it closed before the server's SETTINGS) is a
    /// failure of its own: it had no streams to count.
    fileprivate func connectionClosed(_ channel: Channel) {
        guard channel === connection, !done else { return }
        connection = nil
        let began = client?.began ?? false
        client = nil
        guard NIODeadline.now() < deadline else { return finish() }
        if !began && !connectionCounted { count("the connection closed before HTTP/2 began") }
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    /// The cause, named first: the streams it cuts off report after it.
    fileprivate func connectionRefused(_ reason: String) {
        tally.failures += 1
        tally.firstError = reason
        connectionCounted = true
        connection?.close(promise: nil)
    }

    /// A TLS error on the connection: named as the cause of the streams it
    /// cuts off (which count the failed requests).
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

    private func finish() {
        guard !done else { return }
        done = true
        let old = connection
        connection = nil
        client = nil
        old?.close(promise: nil)
        finished.succeed(tally)
    }
}

/// After the HTTP/2 client: the connection must have agreed on h2, and its
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
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        worker.connectionClosed(context.channel)
        context.fireChannelInactive()
    }
}
