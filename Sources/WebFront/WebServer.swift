import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Serves the router on a listening socket the supervisor bound and handed
/// over (Hummingbird binds its own; this takes a descriptor), HTTP/1.1 with
/// the WebSocket upgrade.
public enum WebServer {
    public static func serve<Responder: HTTPResponder>(descriptor: Int32, responder: Responder, group: any EventLoopGroup, logger: Logger) async throws
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
        let server = try await ServerBootstrap(group: group)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(NIOBSDSocket.Handle(descriptor)) { child in channel.setup(channel: child, logger: logger) }
        // Shutdown: stop accepting; the task group's cancellation closes the connections.
        try await withTaskCancellationOrGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { tasks in
                try await server.executeThenClose { inbound in
                    for try await child in inbound {
                        tasks.addTask { await channel.handle(value: child, logger: logger) }
                    }
                }
                tasks.cancelAll()
            }
        } onCancelOrGracefulShutdown: {
            server.channel.close(promise: nil)
        }
    }
}
