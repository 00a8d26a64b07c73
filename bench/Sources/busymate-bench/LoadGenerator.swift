import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ProxyClient

/// What to load: one URL, directly or through an HTTP proxy (absolute form
/// for http, CONNECT for https), over `connections` connections that keep
/// alive or open anew for every request.
struct LoadPlan: Sendable {
    var https: Bool
    var host: String
    var port: Int
    var path: String
    var proxy: (host: String, port: Int)?
    var connections: Int
    var duration: TimeAmount
    var newConnectionPerRequest = false
    /// Concurrent streams per connection over HTTP/2 (TLS, ALPN h2); 0 for HTTP/1.1.
    var streams = 0
    /// Messages in flight per WebSocket (wss, echoed by the origin); 0 for HTTP.
    var webSocketWindow = 0
    /// Client TLS, trusting whatever the system under test presents.
    var tls: NIOSSLContext?
}

struct LoadResult: Sendable {
    var requests = 0
    var failures = 0
    var bodyBytes = 0
    var seconds = 0.0
    /// Sorted, in microseconds.
    var latencies: [UInt32] = []
    var firstError: String?
    /// How busy the servers' core and the generator's core were.
    var serverCore = Double.nan
    var generatorCore = Double.nan
    /// CPU seconds the proxy's process used while measured (when asked).
    var proxyCPU = Double.nan

    /// Microseconds of the proxy's CPU per request.
    var proxyCPUPerRequest: Double { requests > 0 ? proxyCPU / Double(requests) * 1e6 : .nan }

    var perSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
    var megabytesPerSecond: Double { seconds > 0 ? Double(bodyBytes) / seconds / 1_000_000 : 0 }

    func percentile(_ q: Double) -> Double {
        guard !latencies.isEmpty else { return .nan }
        let index = min(latencies.count - 1, Int((Double(latencies.count) * q).rounded(.up)) - 1)
        return Double(latencies[max(0, index)]) / 1000  // milliseconds
    }
}

/// A closed-loop load generator on NIO: every connection sends its next
/// request when the last response has ended.
enum LoadGenerator {
    static func run(_ plan: LoadPlan, group: EventLoopGroup) async throws -> LoadResult {
        let started = NIODeadline.now()
        let deadline = started + plan.duration
        let running = (0..<plan.connections).map { _ in
            if plan.webSocketWindow > 0 { return WebSocketWorker(plan: plan, loop: group.next(), deadline: deadline).run() }
            return plan.streams > 0
                ? HTTP2Worker(plan: plan, loop: group.next(), deadline: deadline).run()
                : Worker(plan: plan, loop: group.next(), deadline: deadline).run()
        }
        var results: [LoadTally] = []
        for tally in running { results.append(try await tally.get()) }
        var result = LoadResult()
        result.seconds = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        for tally in results {
            result.requests += tally.requests
            result.failures += tally.failures
            result.bodyBytes += tally.bodyBytes
            result.latencies += tally.latencies
            if result.firstError == nil { result.firstError = tally.firstError }
        }
        result.latencies.sort()
        return result
    }
}

/// What one connection's loop counted.
struct LoadTally: Sendable {
    var requests = 0
    var failures = 0
    var bodyBytes = 0
    var latencies: [UInt32] = []
    var firstError: String?
}

/// One HTTP/1.1 connection's loop, confined to its event loop.
private final class Worker: @unchecked Sendable {

    private let plan: LoadPlan
    private let loop: EventLoop
    private let deadline: NIODeadline
    private let finished: EventLoopPromise<LoadTally>
    private var tally = LoadTally()
    private var channel: Channel?
    private var sentAt = NIODeadline.now()
    private let request: HTTPRequestHead
    /// SNI carries names only.
    private var serverName: String? { plan.host.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? nil : plan.host }

    init(plan: LoadPlan, loop: EventLoop, deadline: NIODeadline) {
        self.plan = plan
        self.loop = loop
        self.deadline = deadline
        finished = loop.makePromise()
        let authority = "\(plan.host):\(plan.port)"
        let uri = plan.proxy != nil && !plan.https ? "http://\(authority)\(plan.path)" : plan.path
        var headers = HTTPHeaders([("Host", authority), ("User-Agent", "busymate-bench")])
        if plan.newConnectionPerRequest { headers.add(name: "Connection", value: "close") }
        request = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri, headers: headers)
    }

    func run() -> EventLoopFuture<LoadTally> {
        loop.execute { self.connect(first: true) }
        return finished.futureResult
    }

    /// The first connection is always made: a busy loop may start late.
    private func connect(first: Bool = false) {
        guard first || NIODeadline.now() < deadline else { return finish() }
        sentAt = NIODeadline.now()
        let plan = self.plan
        let target = plan.proxy ?? (plan.host, plan.port)
        let direct = plan.proxy == nil
        let serverName = self.serverName
        ClientBootstrap(group: loop)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // Direct TLS starts right away; through a proxy it waits for CONNECT.
                    if direct, let tls = plan.tls {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                }
            }
            .connect(host: target.0, port: target.1)
            .flatMap { channel -> EventLoopFuture<Channel> in
                guard !direct, plan.https else { return channel.eventLoop.makeSucceededFuture(channel) }
                return ConnectPreamble.open("\(plan.host):\(plan.port)", on: channel).flatMapThrowing {
                    if let tls = plan.tls {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                    return channel
                }
            }
            .flatMapThrowing { channel -> Channel in
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(ResponseReader(self))
                return channel
            }
            .whenComplete { result in
                switch result {
                case let .success(channel):
                    self.channel = channel
                    self.send()
                case let .failure(error):
                    self.failed(error)
                }
            }
    }

    private func send() {
        guard let channel else { return }
        if !plan.newConnectionPerRequest { sentAt = NIODeadline.now() }
        channel.write(HTTPClientRequestPart.head(request), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    func body(_ bytes: Int) { tally.bodyBytes += bytes }

    func responseEnded(status: UInt) {
        let micros = (NIODeadline.now() - sentAt).nanoseconds / 1000
        if status == 200 {
            tally.requests += 1
            tally.latencies.append(UInt32(clamping: micros))
        } else {
            tally.failures += 1
            if tally.firstError == nil { tally.firstError = "status \(status)" }
        }
        if plan.newConnectionPerRequest || NIODeadline.now() >= deadline {
            let old = channel
            channel = nil
            old?.close(promise: nil)
            connect()
        } else {
            send()
        }
    }

    func failed(_ error: Error) {
        // A close after the deadline (or the one we asked for) is no failure.
        guard NIODeadline.now() < deadline else { return finish() }
        tally.failures += 1
        if tally.firstError == nil { tally.firstError = "\(error)" }
        channel?.close(promise: nil)
        channel = nil
        loop.scheduleTask(in: .milliseconds(10)) { self.connect() }
    }

    func closed(_ channel: Channel) {
        guard channel === self.channel else { return }
        failed(ProxyClientError(description: "the connection closed mid-request"))
    }

    private func finish() {
        channel?.close(promise: nil)
        channel = nil
        finished.succeed(tally)
    }
}

private final class ResponseReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    private let worker: Worker
    private var status: UInt = 0

    init(_ worker: Worker) { self.worker = worker }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(head): status = head.status.code
        case let .body(buffer): worker.body(buffer.readableBytes)
        case .end: worker.responseEnded(status: status)
        }
    }

    func channelInactive(context: ChannelHandlerContext) { worker.closed(context.channel) }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        worker.failed(error)
    }
}
