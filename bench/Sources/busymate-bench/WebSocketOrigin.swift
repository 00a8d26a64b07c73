import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// The WebSocket cell's origin: a SwiftNIO echo server (wss with the
/// origin's certificate, one thread). nginx cannot echo, and a Python
/// server would be the cell's bottleneck; this binary runs again in serve
/// mode, so that it is a process of its own, pinned and moved like nginx.
struct WebSocketOrigin {
    let port: Int
    let process: BenchProcess

    static func start(in directory: URL, core: Int, origin: NginxOrigin) throws -> WebSocketOrigin {
        let port = try Wait.freePort()
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let process = try BenchProcess(
            "websocket-origin", core: core, executable: executable,
            arguments: [
                "--serve-websocket-origin", "\(port)", "--origin-certificate", origin.certificate.path, "--origin-key", origin.key.path,
            ], logDirectory: directory)
        do {
            try Wait.until("the WebSocket origin", seconds: 10) { Wait.accepts(port) }
        } catch {
            process.stop()
            throw BenchError("the WebSocket origin did not start:\n\(process.tail())")
        }
        return WebSocketOrigin(port: port, process: process)
    }

    /// Serve mode: echoes on 127.0.0.1:`port` until the process is killed,
    /// or its parent (the bench) is gone: a killed bench leaves no origin.
    static func serve(port: Int, certificate: String, key: String) async throws {
        let parent = getppid()
        let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
        var config = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain, privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        config.applicationProtocols = ["http/1.1"]
        let tls = try NIOSSLContext(configuration: config)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 4096)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let upgrader = NIOWebSocketServerUpgrader(
                        maxFrameSize: 1 << 20,
                        shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(WebSocketEcho()) }
                        })
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: tls))
                    try sync.configureHTTPServerPipeline(withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        while getppid() == parent {
            try await Task.sleep(for: .seconds(1))
        }
        try await server.close()
    }
}
