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
    public static func serve<Responder: HTTPResponder>(descriptor: Int32, responder: Responder, group: any EventLoopGroup, logger: Logger,
                                                       onShutdown: @escaping @Sendable () async -> Void) async throws
    where Responder.Context == WebApp.Context {
        let channel = HTTP1WebSocketUpgradeChannel(
            responder: { request, writer, channel in
                let context = WebApp.Context(source: .init(channel: channel, logger: logger))
                let response: Response
                do {
                    response = try await responder.respond(to: request, context: context)
                } catch let error as any HTTPResponseError {
                    response = try error.response(from: request, context: context)
                } catch {
                    logger.error("a route failed", metadata: ["PATH": "\(request.uri.path)", "ERROR": "\(error)"])
                    response = WebJSON.error(.internalServerError, "\(error)")
                }
                try await writer.write(response: response.head, body: response.body)
            },
            webSocketResponder: responder,
            configuration: .init(http1: .init(idleTimeout: .seconds(75)),
                                 ws: .init(maxFrameSize: 1 << 20, autoPing: .enabled(timePeriod: .seconds(30)))))
        // Graceful shutdown as Hummingbird's own server does it: stop
        // accepting, let each connection finish the request it is on.
        let quiesce = ServerQuiescingHelper(group: group)
        let server = try await ServerBootstrap(group: group)
            .serverChannelInitializer { server in
                server.eventLoop.makeCompletedFuture { try server.pipeline.syncOperations.addHandler(quiesce.makeServerChannelHandler(channel: server)) }
            }
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(NIOBSDSocket.Handle(descriptor)) { child in channel.setup(channel: child, logger: logger) }
        await withTaskGroup(of: Void.self) { outer in
            outer.addTask {
                // Ends once the listener is closed and every connection is done.
                await withDiscardingTaskGroup { tasks in
                    do {
                        try await server.executeThenClose { inbound in
                            for try await child in inbound {
                                tasks.addTask { await channel.handle(value: child, logger: logger) }
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
