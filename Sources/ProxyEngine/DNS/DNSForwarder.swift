import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import Synchronization

/// The tunnel's DNS forwarder: the nftables rules send UDP and TCP 53
/// here. Each query goes on to `dns.servers` (from a fresh socket, so the
/// answer cannot be spoofed by guessing a port), the answer goes back as
/// the server sent it, and the pair is recorded: name, type, answers,
/// rcode, client, latency. Addresses answered are remembered
/// (`DNSNames`) to label connections that carry no name.
public final class DNSForwarder: Sendable {
    private let group: EventLoopGroup
    private let servers = Mutex<[SocketAddress]>([])
    private let capture: (any CaptureSink)?
    private let devices: DeviceRegistry
    private let names: DNSNames
    private let logger = Logger(label: "busymate.dns")
    private let answered = Atomic<Int>(0)
    /// Queries in flight: a flood gets SERVFAIL rather than a socket each.
    private let inFlight = Atomic<Int>(0)
    /// When a failure was last logged (monotonic seconds).
    private let lastFailureLog = Atomic<Int>(Int.min / 2)
    static let maxInFlight = 1_024
    /// Per client: 100 queries a second, 200 at once (a page load asks a
    /// few dozen names). Past that: REFUSED, not forwarded nor recorded.
    let limit = DNSClientLimit(rate: 100, burst: 200)
    private let refused = Atomic<Int>(0)
    private let lastRefusalLog = Atomic<Int>(Int.min / 2)
    static let timeout = TimeAmount.seconds(4)

    public init(group: EventLoopGroup, capture: (any CaptureSink)?, devices: DeviceRegistry, names: DNSNames) {
        self.group = group
        self.capture = capture
        self.devices = devices
        self.names = names
    }

    public var queries: Int { answered.load(ordering: .relaxed) }
    /// Queries refused for their client's rate.
    public var refusedQueries: Int { refused.load(ordering: .relaxed) }

    /// `dns.servers`, or the nameservers of /etc/resolv.conf.
    public func apply(_ settings: AppSettings, resolvConf: String = "/etc/resolv.conf") {
        var list = settings.dns.servers
        if list.isEmpty { list = Self.nameservers(in: (try? String(contentsOfFile: resolvConf, encoding: .utf8)) ?? "") }
        let addresses = list.compactMap { try? SocketAddress(ipAddress: $0, port: 53) }
        servers.withLock { $0 = addresses }
    }

    static func nameservers(in text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2, words[0] == "nameserver" else { return nil }
            // A zone (fe80::1%eth0) cannot be dialled by address alone.
            let address = String(words[1])
            return IPAddressText.isLiteral(address) ? address : nil
        }
    }

    // MARK: listeners

    /// Datagrams up to UDP's own limit (NIO's default buffer is 2 KiB: an
    /// EDNS answer larger than that was cut).
    static let datagramAllocator = FixedSizeRecvByteBufferAllocator(capacity: 65_535)

    public func serveUDP(descriptor: Int32) async throws -> Channel {
        try await DatagramBootstrap(group: group)
            .channelOption(.recvAllocator, value: Self.datagramAllocator)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(UDPQueries(forwarder: self)) }
            }
            .withBoundSocket(descriptor)
            .get()
    }

    public func serveTCP(descriptor: Int32) async throws -> (Channel, ServerQuiescingHelper) {
        let quiesce = ServerQuiescingHelper(group: group)
        let channel = try await ServerBootstrap(group: group)
            // A client that half-closes after its query still gets the answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelInitializer { channel in
                guard self.devices.admits(channel.remoteAddress, listenerIsLoopback: false) else {
                    return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RefusedClient()) }
                }
                return channel.eventLoop.makeCompletedFuture {
                    // A client that sends nothing for 30 s is closed (RFC 7766 §6.2.3 allows it).
                    try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: .seconds(30)))
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .sixteenBits)))
                    try channel.pipeline.syncOperations.addHandler(LengthFieldPrepender(lengthFieldBitLength: .sixteenBits))
                    try channel.pipeline.syncOperations.addHandler(DNSTCPQueries(forwarder: self))
                }
            }
            .withBoundSocket(descriptor)
            .get()
        return (channel, quiesce)
    }

    // MARK: forwarding

    /// Forwards `query` from `client`; `reply` gets the answer (or a
    /// SERVFAIL), on `eventLoop`. A query that cannot be read gets nothing.
    func forward(
        _ query: ByteBuffer, from client: SocketAddress?, transport: String, on eventLoop: EventLoop,
        reply: @escaping @Sendable (ByteBuffer) -> Void
    ) {
        let bytes = Array(query.readableBytesView)
        guard let parsed = DNSMessage(parsing: bytes), !parsed.isResponse, let question = parsed.questions.first else {
            logger.debug(
                "dropped a datagram that is not a DNS query", metadata: ["CLIENT": "\(client.map(ExchangeCapture.describe) ?? "?")"])
            return
        }
        guard limit.admit(client?.ipAddress ?? "", now: DeviceRegistry.monotonic()) else {
            refuse(bytes, question: question, from: client, reply: reply)
            return
        }
        let peer = devices.identify(client, frontEnd: .transparent)
        devices.touch(peer, address: client)
        let started = Date()
        let list = servers.withLock { $0 }
        let record = { @Sendable (server: SocketAddress?, answer: [UInt8]?, error: String?) in
            let failed: UInt8? = answer == nil ? 2 : nil
            self.answered.add(1, ordering: .relaxed)
            let message = answer.flatMap { DNSMessage(parsing: $0) }
            for case let (address?, ttl) in (message?.answers ?? []).map({ ($0.data.address, $0.ttl) }) {
                if let asker = client?.ipAddress {
                    self.names.learn(address: address, name: question.name.lowercased(), ttl: ttl, client: asker)
                }
            }
            let exchange = DNSExchange(
                startedAt: started, endedAt: Date(), client: client, server: server.map(ExchangeCapture.describe),
                name: question.name, type: DNSMessage.typeName(question.type), transport: transport,
                rcode: message?.rcode ?? failed, answers: message?.answerTexts ?? [], error: error)
            self.capture.map { CaptureHook(writer: $0) }?.dnsQuery(exchange, peer: peer)
        }
        let servfail = { @Sendable (why: String) in
            record(nil, nil, why)
            if let failure = DNSMessage.reply(toQuery: bytes, rcode: 2) { reply(ByteBuffer(bytes: failure)) }
        }
        guard !list.isEmpty else {
            servfail("no DNS server: set dns.servers (or nameservers in /etc/resolv.conf)")
            return
        }
        guard inFlight.add(1, ordering: .relaxed).newValue <= Self.maxInFlight else {
            inFlight.subtract(1, ordering: .relaxed)
            servfail("over \(Self.maxInFlight) queries in flight")
            return
        }
        let attempt = transport == "tcp" ? Self.askTCP : Self.askUDP
        Self.ask(list, query: bytes, id: parsed.id, attempt: attempt, group: group, on: eventLoop).whenComplete { result in
            self.inFlight.subtract(1, ordering: .relaxed)
            switch result {
            case let .success((server, answer)):
                record(server, answer, nil)
                reply(ByteBuffer(bytes: answer))
            case let .failure(error):
                // Once in ten seconds: a server that is down fails every query.
                let now = Int(DeviceRegistry.monotonic())
                let last = self.lastFailureLog.load(ordering: .relaxed)
                if now - last >= 10, self.lastFailureLog.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged {
                    self.logger.notice(
                        "no answer from the DNS servers; answering SERVFAIL (each query's row says why)",
                        metadata: ["NAME": "\(question.name)", "ERROR": "\(error)"])
                }
                servfail("\(error)")
            }
        }
    }

    /// A client past its rate: REFUSED (no bigger than the query), counted,
    /// and said once in ten seconds.
    private func refuse(_ query: [UInt8], question: DNSMessage.Question, from client: SocketAddress?, reply: @Sendable (ByteBuffer) -> Void)
    {
        let count = refused.add(1, ordering: .relaxed).newValue
        let now = Int(DeviceRegistry.monotonic())
        let last = lastRefusalLog.load(ordering: .relaxed)
        if now - last >= 10, lastRefusalLog.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged {
            logger.notice(
                "a DNS client is over its rate; answering REFUSED, not forwarding nor recording",
                metadata: [
                    "CLIENT": "\(client.map(ExchangeCapture.describe) ?? "?")", "NAME": "\(question.name)",
                    "REFUSED_SO_FAR": "\(count)",
                ])
        }
        if let answer = DNSMessage.reply(toQuery: query, rcode: 5) { reply(ByteBuffer(bytes: answer)) }
    }

    typealias Attempt = @Sendable ([UInt8], SocketAddress, EventLoopGroup) -> EventLoopFuture<[UInt8]>

    /// Each server in turn until one answers with the query's id.
    private static func ask(
        _ servers: [SocketAddress], query: [UInt8], id: UInt16, attempt: @escaping Attempt, group: EventLoopGroup,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<(SocketAddress, [UInt8])> {
        guard let server = servers.first else {
            return eventLoop.makeFailedFuture(DNSForwardError(description: "no DNS server answered"))
        }
        let rest = Array(servers.dropFirst())
        return attempt(query, server, group).hop(to: eventLoop).flatMapThrowing { answer -> (SocketAddress, [UInt8]) in
            guard answer.count >= 2, UInt16(answer[0]) << 8 | UInt16(answer[1]) == id else {
                throw DNSForwardError(description: "\(server) answered another query")
            }
            return (server, answer)
        }.flatMapError { error in
            rest.isEmpty
                ? eventLoop.makeFailedFuture(DNSForwardError(description: "\(ExchangeCapture.describe(server)): \(error)"))
                : ask(rest, query: query, id: id, attempt: attempt, group: group, on: eventLoop)
        }
    }

    private static let askUDP: Attempt = { query, server, group in
        let promise = group.next().makePromise(of: [UInt8].self)
        // Connected: the server's ICMP "port unreachable" fails it at once.
        let channel = DatagramBootstrap(group: group)
            .channelOption(.recvAllocator, value: datagramAllocator)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(OneAnswer(from: server, promise: promise))
                }
            }
            .connect(to: server)
        return answer(promise, on: channel) { $0.writeAndFlush(AddressedEnvelope(remoteAddress: server, data: ByteBuffer(bytes: query))) }
    }

    private static let askTCP: Attempt = { query, server, group in
        let promise = group.next().makePromise(of: [UInt8].self)
        let channel = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(LengthFieldBasedFrameDecoder(lengthFieldBitLength: .sixteenBits)))
                    try channel.pipeline.syncOperations.addHandler(LengthFieldPrepender(lengthFieldBitLength: .sixteenBits))
                    try channel.pipeline.syncOperations.addHandler(OneStreamAnswer(promise: promise))
                }
            }
            .connect(to: server)
        return answer(promise, on: channel) { $0.writeAndFlush(ByteBuffer(bytes: query)) }
    }

    /// Sends the query once `channel` is up; the answer, or a failure
    /// after `timeout`. The channel closes either way.
    private static func answer(
        _ promise: EventLoopPromise<[UInt8]>, on channel: EventLoopFuture<Channel>,
        send: @escaping @Sendable (Channel) -> EventLoopFuture<Void>
    ) -> EventLoopFuture<[UInt8]> {
        channel.whenComplete { result in
            switch result {
            case let .failure(error): promise.fail(error)
            case let .success(channel):
                let deadline = channel.eventLoop.scheduleTask(in: timeout) {
                    promise.fail(DNSForwardError(description: "no answer within \(timeout.nanoseconds / 1_000_000_000) s"))
                }
                promise.futureResult.whenComplete { _ in
                    deadline.cancel()
                    channel.close(promise: nil)
                }
                send(channel).whenFailure { promise.fail($0) }
            }
        }
        return promise.futureResult
    }
}

extension DNSMessage.RecordData {
    /// The address an A or AAAA record gives.
    var address: String? {
        switch self {
        case let .a(text), let .aaaa(text): return text
        default: return nil
        }
    }
}

/// Queries arriving over UDP (from clients the access rules admit).
private final class UDPQueries: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>
    private let forwarder: DNSForwarder
    init(forwarder: DNSForwarder) { self.forwarder = forwarder }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        let client = envelope.remoteAddress
        guard forwarder.admits(client) else { return }
        let channel = context.channel
        forwarder.forward(envelope.data, from: client, transport: "udp", on: context.eventLoop) { answer in
            channel.writeAndFlush(AddressedEnvelope(remoteAddress: client, data: answer), promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // An ICMP error from one client must not stop the others'.
    }
}

private final class OneAnswer: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let server: SocketAddress
    private let promise: EventLoopPromise<[UInt8]>
    init(from server: SocketAddress, promise: EventLoopPromise<[UInt8]>) {
        self.server = server
        self.promise = promise
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = unwrapInboundIn(data)
        guard envelope.remoteAddress.ipAddress == server.ipAddress, envelope.remoteAddress.port == server.port else { return }
        promise.succeed(Array(envelope.data.readableBytesView))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { promise.fail(error) }
}

private final class OneStreamAnswer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let promise: EventLoopPromise<[UInt8]>
    init(promise: EventLoopPromise<[UInt8]>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        promise.succeed(Array(unwrapInboundIn(data).readableBytesView))
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(DNSForwardError(description: "closed without an answer"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { promise.fail(error) }
}

extension DNSForwarder {
    /// A UDP client the access rules admit (no open resolver).
    func admits(_ client: SocketAddress) -> Bool { devices.admits(client, listenerIsLoopback: false) }
}
