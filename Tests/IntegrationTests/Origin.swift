import CompressNIO
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import SwiftASN1
import Synchronization
import X509

/// A real origin on loopback, port 0: answers `origin <method> <path>` with
/// keep-alive, over plain HTTP or TLS with a certificate made for the test.
final class Origin: @unchecked Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private(set) var port = 0
    private var channel: Channel?
    /// The TLS origin's certificate (PEM), for `curl --cacert`.
    private(set) var certificatePEM: String?
    /// Every request head received, as "METHOD target" (the raw target as it came).
    let received = RequestLog()

    static func plain() async throws -> Origin {
        let origin = Origin()
        try await origin.start(tls: nil)
        return origin
    }

    static func tls(hostname: String = "localhost") async throws -> Origin {
        let origin = Origin()
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(hostname) }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                SubjectAlternativeNames([.dnsName(hostname), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            },
            issuerPrivateKey: .init(key))
        let pem = try certificate.serializeAsPEM().pemString
        origin.certificatePEM = pem
        let config = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(pem.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(key.pemRepresentation.utf8), format: .pem)))
        try await origin.start(tls: try NIOSSLContext(configuration: config))
        return origin
    }

    private func start(tls: NIOSSLContext?) async throws {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    // `/ws` is a WebSocket echo server.
                    let http = OriginHandler(log: self.received)
                    let websocket = NIOWebSocketServerUpgrader(
                        shouldUpgrade: { channel, head in
                            channel.eventLoop.makeSucceededFuture(head.uri == "/ws" ? HTTPHeaders() : nil)
                        },
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(WebSocketEcho()) }
                        })
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                        withServerUpgrade: (
                            upgraders: [websocket],
                            completionHandler: { context in
                                let ops = context.pipeline.syncOperations
                                if let http = try? ops.handler(type: OriginHandler.self) { ops.removeHandler(http, promise: nil) }
                            }
                        ))
                    try channel.pipeline.syncOperations.addHandler(http)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        self.channel = channel
        port = channel.localAddress?.port ?? 0
    }

    func stop() async {
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }
}

/// The request heads an origin received, in order.
final class RequestLog: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

private final class OriginHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private let log: RequestLog
    init(log: RequestLog) { self.log = log }
    private var head: HTTPRequestHead?
    /// The request's body, for `/echo-body`.
    private var body = ByteBuffer()
    /// `/big?mb=N`: bytes still to stream, written only while writable.
    private var streamRemaining = 0
    private static let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable && streamRemaining > 0 { pump(context: context) }
    }

    private var pumping = false
    private var pumpAgain = false

    private func pump(context: ChannelHandlerContext) {
        // flush() can re-enter through channelWritabilityChanged: note it
        // and go round again rather than recurse.
        guard !pumping else {
            pumpAgain = true
            return
        }
        pumping = true
        defer { pumping = false }
        repeat {
            pumpAgain = false
            while streamRemaining > 0 && context.channel.isWritable {
                let n = min(Self.chunk.count, streamRemaining)
                streamRemaining -= n
                context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: Self.chunk[0..<n])))), promise: nil)
            }
            if streamRemaining == 0 {
                streamRemaining = -1
                context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            context.flush()
        } while pumpAgain && context.channel.isWritable
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(h):
            head = h
            log.append("\(h.method.rawValue) \(h.uri)")
            // NIO leaves Expect: 100-continue to the application.
            if h.headers["expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                context.writeAndFlush(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
            }
        case var .body(part):
            body.writeBuffer(&part)
        case .end:
            guard let head else { return }
            self.head = nil
            let received = body
            body.clear()
            if head.uri.hasPrefix("/echo-body") {
                // "origin <method> <uri>", then the request body as it came.
                var text = context.channel.allocator.buffer(string: "origin \(head.method.rawValue) \(head.uri)\n")
                text.writeImmutableBuffer(received)
                let headers = HTTPHeaders([("Content-Type", "text/plain"), ("Content-Length", "\(text.readableBytes)")])
                context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.body(.byteBuffer(text))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            // `/slow?ms=N` answers after N milliseconds.
            if head.uri.hasPrefix("/slow?ms="), let ms = Int64(head.uri.dropFirst("/slow?ms=".count)) {
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .milliseconds(ms)) {
                    let (handler, context) = bound.value
                    handler.respond(to: head, context: context)
                }
                return
            }
            if head.uri.hasPrefix("/big?mb="), let mb = Int(head.uri.dropFirst("/big?mb=".count)) {
                let headers = HTTPHeaders([("Content-Type", "application/octet-stream"), ("Content-Length", "\(mb << 20)")])
                context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                streamRemaining = mb << 20
                pump(context: context)
                return
            }
            if head.uri == "/break" {
                // Promises 1000 bytes, sends 10, hangs up.
                let headers = HTTPHeaders([("Content-Length", "1000")])
                context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "0123456789")))), promise: nil)
                context.close(promise: nil)
                return
            }
            if head.uri == "/echo-headers" {
                // The request's headers as the body, one "name: value" a line.
                let text = head.headers.map { "\($0.name): \($0.value)\n" }.joined()
                let headers = HTTPHeaders([("Content-Type", "text/plain"), ("Content-Length", "\(text.utf8.count)"), ("X-Origin", "yes")])
                context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(Self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
                context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            if head.uri == "/gzip" {
                respondGzip(context: context)
                return
            }
            respond(to: head, context: context)
        }
    }

    /// `/gzip`: a compressed JSON body with Content-Encoding: gzip.
    private func respondGzip(context: ChannelHandlerContext) {
        var plain = context.channel.allocator.buffer(string: "{\"compressed\":true,\"n\":42}")
        guard let body = try? plain.compress(with: .gzip()) else { return }
        let headers = HTTPHeaders([
            ("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Content-Length", "\(body.readableBytes)"),
        ])
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func respond(to head: HTTPRequestHead, context: ChannelHandlerContext) {
        let text = "origin \(head.method.rawValue) \(head.uri)\n"
        var headers = HTTPHeaders([("Content-Type", "text/plain"), ("Content-Length", "\(text.utf8.count)")])
        if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
        context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
        if head.method != .HEAD {
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: text)))), promise: nil)
        }
        context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// Echoes text and binary frames; answers pings; closes on close.
private final class WebSocketEcho: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = Self.unwrapInboundIn(data)
        switch frame.opcode {
        case .text, .binary:
            context.writeAndFlush(
                Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: frame.opcode, data: frame.unmaskedData)), promise: nil)
        case .ping:
            context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)), promise: nil)
        case .connectionClose:
            let channel = context.channel
            context.writeAndFlush(Self.wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)))
                .whenComplete { _ in
                    channel.close(promise: nil)
                }
        default:
            break
        }
    }
}
