import BusymateShared
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import Synchronization

/// One listening socket being served, with what drains its connections.
public struct ServingListener: Sendable {
    public let channel: Channel
    /// A quiescing helper tracks exactly one server channel (none for a
    /// datagram socket: it has no connections to drain).
    let quiesce: ServerQuiescingHelper?

    public init(channel: Channel, quiesce: ServerQuiescingHelper?) {
        self.channel = channel
        self.quiesce = quiesce
    }
}

/// The explicit proxy: serves listening sockets the supervisor bound and
/// handed over, and drains them on request.
public final class ProxyServer: Sendable {
    public let stats = TrafficStats()
    public let interception: Interception
    /// nil: capture off (a store that cannot be opened).
    public let capture: (any CaptureSink)?
    /// `settings.json`'s rules, applied per request.
    public let rules = RuleEngine()
    /// `settings.json`'s breakpoints, and the messages held now.
    public let breakpoints: BreakpointController
    /// `settings.json`'s timeouts: each connection takes them as it opens.
    public let timeouts = LiveTimeouts()
    /// Access, attribution and presence.
    public let devices = DeviceRegistry()
    /// Names the DNS forwarder learned, by address.
    public let dnsNames = DNSNames()
    /// The WebSockets open now, for `busymate ws send`.
    public let sockets = WebSocketRegistry()
    private let group: MultiThreadedEventLoopGroup
    private let logger = Logger(label: "busymate.proxy")

    public init(
        group: MultiThreadedEventLoopGroup, interception: Interception, capture: (any CaptureSink)?, breakpoints: BreakpointController
    ) {
        self.group = group
        self.interception = interception
        self.capture = capture
        self.breakpoints = breakpoints
    }

    /// Starts accepting on `descriptor` (already bound and listening); NIO
    /// owns the descriptor from here on.
    public func serve(descriptor: Int32, frontEnd: FrontEnd = .explicit) async throws -> ServingListener {
        let stats = self.stats
        let devices = self.devices
        let dnsNames = self.dnsNames
        let sockets = self.sockets
        let listenerIsLoopback = ListenSocket.localAddress(descriptor).map { IPNetwork.isLoopback(Self.host(of: $0)) } ?? false
        let interception = self.interception
        let rules = self.rules
        let breakpoints = self.breakpoints
        let capture = self.capture
        let timeouts = self.timeouts
        let connectLogger = Logger(label: "busymate.connect")
        let quiesce = ServerQuiescingHelper(group: group)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelInitializer { [quiesce] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: channel))
                    try channel.pipeline.syncOperations.addHandler(AcceptPause())
                    try channel.pipeline.syncOperations.addHandler(AcceptErrorLogger())
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            // A client's FIN is "no more from me", not a hang-up: each layer passes it on.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                // No open proxy: refused before a byte is read.
                let admission = devices.admission(channel.remoteAddress, listenerIsLoopback: listenerIsLoopback)
                guard admission != .refused else {
                    return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(RefusedClient()) }
                }
                if case let .granted(until) = admission, let ip = channel.remoteAddress?.ipAddress.map(DeviceRegistry.normalized) {
                    do {
                        try channel.pipeline.syncOperations.addHandler(
                            GrantExpiry(devices: devices, ip: ip, until: until, logger: connectLogger))
                    } catch {
                        return channel.eventLoop.makeFailedFuture(error)
                    }
                }
                var services = ProxyServices(
                    stats: stats, interception: interception, rules: rules, breakpoints: breakpoints, capture: capture,
                    timeouts: timeouts.current, logger: connectLogger)
                services.peer = devices.identify(channel.remoteAddress, frontEnd: frontEnd)
                services.devices = devices
                services.dnsNames = dnsNames
                services.sockets = sockets
                services.presence = PresenceTouch(registry: devices, peer: services.peer, client: channel.remoteAddress)
                services.presence?.touch()
                if frontEnd == .transparent { return ProxyPipeline.startTransparent(channel, services: services) }
                return channel.eventLoop.makeCompletedFuture {
                    try ProxyPipeline.startExplicitProxy(channel, services: services)
                }
            }
            .withBoundSocket(descriptor)
            .get()
        if let local = channel.localAddress { LoopGuard.shared.listening(on: local) }
        return ServingListener(channel: channel, quiesce: quiesce)
    }

    /// Stops accepting on `listeners` and returns once they are closed
    /// (so another tunnel may take over the sockets), with a future for the
    /// moment the last of their connections has closed. Idle keep-alive
    /// connections are asked to close at once.
    public func stopAccepting(_ listeners: [ServingListener]) async -> EventLoopFuture<Void> {
        // NIO sets up an accepted connection on its own event loop and closes
        // it if the server channel has closed by the time that is done: the
        // client would get a reset. So stop reading first, let one task pass
        // through every loop (set-ups queued before it finish), then close.
        for listener in listeners {
            if let local = listener.channel.localAddress { LoopGuard.shared.stopped(listening: local) }
            try? await listener.channel.setOption(ChannelOptions.autoRead, value: false).get()
        }
        for loop in group.makeIterator() { try? await loop.submit {}.get() }
        for listener in listeners { try? await listener.channel.eventLoop.submit {}.get() }
        let loop = group.next()
        let connectionsDone = EventLoopFuture.andAllComplete(
            listeners.map { listener in
                let promise = loop.makePromise(of: Void.self)
                if let quiesce = listener.quiesce {
                    quiesce.initiateShutdown(promise: promise)
                } else {
                    listener.channel.close(promise: promise)
                }
                return promise.futureResult
            }, on: loop)
        for listener in listeners { try? await listener.channel.closeFuture.get() }
        return connectionsDone
    }

    /// `1.2.3.4` of `1.2.3.4:80`, `::1` of `[::1]:80`.
    static func host(of bound: String) -> String {
        if bound.hasPrefix("["), let close = bound.firstIndex(of: "]") {
            return String(bound[bound.index(after: bound.startIndex)..<close])
        }
        return bound.split(separator: ":").first.map(String.init) ?? bound
    }

    /// Waits for `connectionsDone`, at most `grace`.
    public func finishDrain(_ connectionsDone: EventLoopFuture<Void>, grace: Duration) async {
        await withTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try? await connectionsDone.get() }
            tasks.addTask { try? await Task.sleep(for: grace) }
            await tasks.next()
            tasks.cancelAll()
        }
        if stats.activeConnections > 0 {
            logger.notice(
                "drain grace period over; closing the remaining connections", metadata: ["CONNECTIONS": "\(stats.activeConnections)"])
        }
    }
}

/// The timeouts in force, swapped whole on a settings reload.
public final class LiveTimeouts: Sendable {
    private let value = Mutex(AppSettings.Timeouts())
    public init() {}
    public func apply(_ settings: AppSettings) { value.withLock { $0 = settings.timeouts } }
    var current: AppSettings.Timeouts { value.withLock { $0 } }
}
