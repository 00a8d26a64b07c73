import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOExtras
import NIOPosix
import ServiceLifecycle

/// Serves the router on a listening socket the supervisor bound and handed
/// over (Hummingbird binds its own; this takes a descriptor), HTTP/1.1 with
/// the WebSocket upgrade.
public enum WebServer {
    /// Connections served at once; past it, a new one takes the place of
    /// the one that has waited longest for a request (`ConnectionTable`).
    public static let maxConnections = 1_024
    /// A connection waiting for a request, sending nothing, is closed after this.
    static let silence = TimeAmount.seconds(30)
    /// A request head must be whole within this of its first byte (`RequestClock`).
    static let headTimeout = TimeAmount.seconds(10)

    public static func serve<Responder: HTTPResponder>(
        descriptor: Int32, responder: Responder, group: any EventLoopGroup, logger: Logger,
        onShutdown: @escaping @Sendable () async -> Void
    ) async throws
    where Responder.Context == WebApp.Context {
        let table = ConnectionTable(limit: maxConnections)
        let channel = HTTP1WebSocketUpgradeChannel(
            responder: { request, writer, channel in
                let context = WebApp.Context(source: .init(channel: channel, logger: logger))
                try await respond(to: request, with: responder, context: context, writer: writer, channel: channel, table: table) { error in
                    if error is CancellationError {
                        logger.info("a request stopped: its client left", metadata: ["PATH": "\(request.uri.path)"])
                        return WebJSON.error(.serviceUnavailable, "stopped: the client left")
                    }
                    logger.error("a route failed", metadata: ["PATH": "\(request.uri.path)", "ERROR": "\(error)"])
                    // What SQLite said, never the statement (a filter's SQL was echoed to the page).
                    guard StoreHealth.isStoreError(error) else { return WebJSON.error(.internalServerError, "\(error)") }
                    return WebJSON.error(
                        StoreHealth.isFilterTimeout(error) ? .unprocessableContent : .internalServerError, StoreHealth.describe(error))
                }
            },
            webSocketResponder: responder,
            configuration: .init(
                http1: .init(additionalChannelHandlers: [RequestPhase()], idleTimeout: .seconds(75)),
                // Pings keep a dead page's socket from staying for ever.
                ws: .init(maxFrameSize: 1 << 20, autoPing: .enabled(timePeriod: .seconds(20)))))
        try await serve(descriptor: descriptor, childChannel: channel, table: table, group: group, logger: logger, onShutdown: onShutdown)
    }

    /// Serves `childChannel` (an HTTP/1 channel, with or without the
    /// WebSocket upgrade) on a handed-over listening socket until graceful
    /// shutdown; shared by the page and the onboarding listener.
    static func serve<Child: ServerChildChannel>(
        descriptor: Int32, childChannel channel: Child, table: ConnectionTable, group: any EventLoopGroup,
        logger: Logger, onShutdown: @escaping @Sendable () async -> Void
    ) async throws {
        // What clients get wrong is theirs, not this log's: Hummingbird logs a
        // bad request or a dropped upgrade at error level, once per connection.
        let connectionLogger = {
            var quiet = logger
            quiet.logLevel = .critical
            return quiet
        }()
        // Graceful shutdown as Hummingbird's own server does it: stop
        // accepting, let each connection finish the request it is on.
        let quiesce = ServerQuiescingHelper(group: group)
        let server = try await ServerBootstrap(group: group)
            .serverChannelInitializer { server in
                server.eventLoop.makeCompletedFuture {
                    try server.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: server))
                }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(NIOBSDSocket.Handle(descriptor)) { child in
                // Hummingbird times a connection out only once a request head
                // is read: one that sends nothing (or a byte now and then)
                // would stay for ever. A bound on connections: no one
                // without the token fills the descriptor table, or keeps
                // others out.
                child.eventLoop.makeCompletedFuture {
                    if let id = table.admit(child) {
                        let clock = RequestClock(headTimeout: Self.headTimeout, silence: Self.silence, table: table, id: id)
                        try child.pipeline.syncOperations.addHandler(clock)
                    } else {
                        // Every slot is answering a request. Closed at once, but still
                        // finished through the channel's own handling: an async
                        // channel dropped unfinished traps.
                        child.close(promise: nil)
                    }
                }.flatMap { channel.setup(channel: child, logger: connectionLogger) }
            }
        await withTaskGroup(of: Void.self) { outer in
            outer.addTask {
                // Ends once the listener is closed and every connection is done.
                await withDiscardingTaskGroup { tasks in
                    do {
                        try await server.executeThenClose { inbound in
                            for try await child in inbound {
                                tasks.addTask { await channel.handle(value: child, logger: connectionLogger) }
                            }
                        }
                    } catch {
                        logger.error("the web listener failed", metadata: ["ERROR": "\(error)"])
                    }
                }
            }
            outer.addTask {
                guard (try? await gracefulShutdown()) != nil else { return }
                // Stop accepting first (the other web front, or the backlog,
                // takes the next connections). NIO closes a connection whose
                // set-up ends after its server channel closed, so stop reading,
                // let a task pass through every loop, and give a connection
                // accepted a moment ago the time to have its request read (its
                // client sent it already) before idle connections are closed.
                try? await server.channel.setOption(ChannelOptions.autoRead, value: false).get()
                for loop in group.makeIterator() { try? await loop.submit {}.get() }
                try? await Task.sleep(for: .milliseconds(250))
                quiesce.initiateShutdown(promise: nil)
                // Live pages are told to go (they reconnect to the next web front).
                await onShutdown()
                // A connection that does not finish within three seconds is closed.
                try? await Task.sleep(for: .seconds(3))
            }
            await outer.next()
            outer.cancelAll()
        }
    }
}

extension WebServer {
    /// A route's response, its HTTP error's, or `failed`'s for any other
    /// error. The route runs in a task of its own, cancelled if the client
    /// leaves first: a slow query stops (`CaptureReader`).
    static func respond<Responder: HTTPResponder>(
        to request: Request, with responder: Responder, context: Responder.Context, writer: consuming ResponseWriter,
        channel: any Channel, table: ConnectionTable,
        failed: @escaping @Sendable (Error) -> Response
    ) async throws where Responder.Context: RequestContext {
        let route = Task {
            do {
                return try await responder.respond(to: request, context: context)
            } catch let error as any HTTPResponseError {
                return try error.response(from: request, context: context)
            } catch {
                return failed(error)
            }
        }
        table.onLeave(channel) { route.cancel() }
        defer { table.onLeave(channel, nil) }
        let response = try await withTaskCancellationHandler {
            try await route.value
        } onCancel: {
            route.cancel()
        }
        try await writer.write(response: response.head, body: response.body)
    }

    /// The onboarding listener: plain HTTP/1.1, its own routes, no token.
    public static func serveOnboarding(
        descriptor: Int32, paths: GroupPaths, settings: OnboardingSettings, group: any EventLoopGroup, logger: Logger
    ) async throws {
        let responder = OnboardingRoutes(
            paths: paths, settings: settings, log: OnboardingLogWriter(paths: paths), desk: EnrolmentDesk(paths: paths)
        ).router().buildResponder()
        let table = ConnectionTable(limit: maxConnections)
        let channel = HTTP1Channel(
            responder: { request, writer, channel in
                let context = OnboardingContext(source: .init(channel: channel, logger: logger))
                try await respond(to: request, with: responder, context: context, writer: writer, channel: channel, table: table) { error in
                    OnboardingRoutes.response(.internalServerError, type: "text/plain; charset=utf-8", body: Data("\(error)\n".utf8))
                }
            }, configuration: .init(additionalChannelHandlers: [RequestPhase()], idleTimeout: .seconds(30)))
        try await serve(descriptor: descriptor, childChannel: channel, table: table, group: group, logger: logger) {}
    }
}
