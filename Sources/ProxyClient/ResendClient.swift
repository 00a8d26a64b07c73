import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

/// Sends one stored request through the proxy, as a client would: absolute
/// form for http, CONNECT then TLS (trusting the system store and the
/// group's CA) for https. A request first sent over HTTP/2 goes again over
/// HTTP/2: ALPN `h2` inside the tunnel, or h2c with prior knowledge to the
/// proxy for http. The CLI's `resend`/`compose` and the web page's.
public enum ResendClient {
    /// Tells the tunnel which exchange a request repeats; the tunnel records
    /// it as `resent_from` and does not forward it.
    public static let header = "X-Busymate-Resent-From"

    public struct Answer: Sendable {
        public var status: Int
        public var reason: String
        public var bodyBytes: Int
    }

    /// `resentFrom`: the request id of the exchange this repeats, for the
    /// tunnel to record (nil for a new request).
    public static func send(
        _ record: ExchangeRecord, body: Data, resentFrom: String?, proxy: (host: String, port: Int), trusting caPEM: URL
    ) async throws -> Answer {
        let https = record.scheme == "https"
        let http2 = record.httpVersion == "HTTP/2.0"
        var headers = HTTPHeaders()
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "te", "upgrade"]
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) where !skip.contains(name.lowercased()) {
            headers.add(name: name, value: value)
        }
        // A gRPC server wants `TE: trailers` as the client sent it.
        if ExchangeRecord.decodeHeaders(record.requestHeaders).contains(where: {
            $0.0.lowercased() == "te" && $0.1.lowercased().contains("trailers")
        }) {
            headers.add(name: "TE", value: "trailers")
        }
        headers.remove(name: header)
        if let resentFrom { headers.add(name: header, value: resentFrom) }
        headers.add(name: "Content-Length", value: "\(body.count)")
        if !http2 { headers.add(name: "Connection", value: "close") }
        let uri = https || http2 ? record.path : record.url
        let head = HTTPRequestHead(
            version: http2 ? HTTPVersion(major: 2, minor: 0) : .http1_1, method: HTTPMethod(rawValue: record.method), uri: uri,
            headers: headers)
        let authority = record.host.contains(":") ? "[\(record.host)]:\(record.port)" : "\(record.host):\(record.port)"
        if http2 && !head.headers.contains(name: "host") { headers.add(name: "Host", value: authority) }

        var tls: NIOSSLContext?
        if https {
            var config = TLSConfiguration.makeClientConfiguration()
            config.additionalTrustRoots = [.file(caPEM.path)]
            if http2 { config.applicationProtocols = ["h2"] }
            tls = try NIOSSLContext(configuration: config)
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ClientBootstrap(group: group).connectTimeout(.seconds(10)).connect(host: proxy.host, port: proxy.port).get()
        defer { channel.close(promise: nil) }
        if let tls {
            try await ConnectPreamble.open(authority, on: channel).get()
            let serverName = record.host.contains(":") || record.host.allSatisfy({ $0.isNumber || $0 == "." }) ? nil : record.host
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
            }.get()
        }
        let answer = channel.eventLoop.makePromise(of: Answer.self)
        let head2 = HTTPRequestHead(version: head.version, method: head.method, uri: head.uri, headers: headers)
        let stream: Channel
        if http2 {
            // One stream on an HTTP/2 connection (NIO's HTTP/1-to-HTTP/2 codec on it).
            stream = try await channel.eventLoop.flatSubmit {
                let handler = NIOHTTP2Handler(mode: .client, eventLoop: channel.eventLoop) { $0.close() }
                do {
                    try channel.pipeline.syncOperations.addHandler(handler)
                    return try handler.syncMultiplexer().createStreamChannel { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandlers([
                                HTTP2FramePayloadToHTTP1ClientCodec(httpProtocol: https ? .https : .http), ResponseCollector(answer),
                            ])
                        }
                    }
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }.get()
        } else {
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer))
            }.get()
            stream = channel
        }
        stream.write(HTTPClientRequestPart.head(head2), promise: nil)
        if !body.isEmpty { stream.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
        // A server may answer (and end the stream) before the request has
        // gone whole, as for an upstream that cannot be reached: the answer counts.
        let sent = stream.eventLoop.makePromise(of: Void.self)
        stream.writeAndFlush(HTTPClientRequestPart.end(nil), promise: sent)
        do {
            return try await answer.futureResult.get()
        } catch {
            try await sent.futureResult.get()
            throw error
        }
    }
}

/// Collects the response's head and counts its body.
private final class ResponseCollector: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    private var head: HTTPResponseHead?
    private var bytes = 0
    private let answer: EventLoopPromise<ResendClient.Answer>

    init(_ answer: EventLoopPromise<ResendClient.Answer>) { self.answer = answer }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case let .head(h): head = h
        case let .body(buffer): bytes += buffer.readableBytes
        case .end:
            guard let head else { return }
            answer.succeed(.init(status: Int(head.status.code), reason: head.status.reasonPhrase, bodyBytes: bytes))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        answer.fail(ProxyClientError(description: "the connection closed before the response ended"))
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        answer.fail(error)
        context.close(promise: nil)
    }
}
