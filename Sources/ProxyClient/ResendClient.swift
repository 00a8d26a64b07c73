import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import ProxyClient

/// Sends one stored request through the proxy, as a client would: absolute
/// form for http, CONNECT then TLS (trusting the system store and the
/// group's CA) for https. The CLI's `resend`/`compose` and the web page's.
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
    public static func send(_ record: ExchangeRecord, body: Data, resentFrom: String?, proxy: (host: String, port: Int), trusting caPEM: URL) async throws -> Answer {
        let https = record.scheme == "https"
        var headers = HTTPHeaders()
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "te", "upgrade"]
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) where !skip.contains(name.lowercased()) {
            headers.add(name: name, value: value)
        }
        headers.remove(name: header)
        if let resentFrom { headers.add(name: header, value: resentFrom) }
        headers.add(name: "Content-Length", value: "\(body.count)")
        headers.add(name: "Connection", value: "close")
        let head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: record.method), uri: https ? record.path : record.url, headers: headers)
        let authority = record.host.contains(":") ? "[\(record.host)]:\(record.port)" : "\(record.host):\(record.port)"

        var tls: NIOSSLContext?
        if https {
            var config = TLSConfiguration.makeClientConfiguration()
            config.additionalTrustRoots = [.file(caPEM.path)]
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
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addHTTPClientHandlers()
            try channel.pipeline.syncOperations.addHandler(ResponseCollector(answer))
        }.get()
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        if !body.isEmpty { channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil) }
        try await channel.writeAndFlush(HTTPClientRequestPart.end(nil)).get()
        return try await answer.futureResult.get()
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

