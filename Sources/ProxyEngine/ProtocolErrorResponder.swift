import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// NIO's `HTTPServerProtocolErrorHandler`, told apart by cause: a header
/// block over the decoder's limit (80 KiB) gets `431`, anything else
/// malformed `400`; a request that never parsed leaves a row with the error.
/// As in NIO's, nothing is sent once a response has begun, and the decoder
/// closes the connection right after.
final class ProtocolErrorResponder: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Request { case between, reading }
    private var request = Request.between
    private var responseOpen = false
    private let capture: CaptureWriter?
    private let logger: Logger
    /// Where the connection was headed: the CONNECT target when intercepted.
    private let target: ProxyTarget?

    init(capture: CaptureWriter?, logger: Logger, interceptedTarget: ProxyTarget? = nil) {
        self.capture = capture
        self.logger = logger
        target = interceptedTarget
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch Self.unwrapInboundIn(data) {
        case .head: request = .reading
        case .end: request = .between
        case .body: break
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let parse = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let status: HTTPResponseStatus = parse == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
        let why = parse == .headerOverflow ? "the request's header block is over 80 KiB" : "malformed HTTP (\(parse))"
        logger.notice("refused a malformed request", metadata: ["STATUS": "\(status.code)", "ERROR": "\(parse)"])
        if !responseOpen {
            let body = context.channel.allocator.buffer(string: "Busymate: \(why)\n")
            let headers = HTTPHeaders([("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(body.readableBytes)")])
            context.write(Self.wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
        }
        // A request under way is the forward handler's row; this one never parsed.
        if request == .between, let capture { capture.submit(record(status: status, why: why, context: context)) }
        context.fireErrorCaught(error)
    }

    private func record(status: HTTPResponseStatus, why: String, context: ChannelHandlerContext) -> ExchangeRecord {
        let host = target?.host.lowercased() ?? ""
        let url = target.map { "https://\(ExchangeCapture.bracketed($0.host)):\($0.port)" } ?? ""
        var record = ExchangeRecord(scheme: target == nil ? "http" : "https", method: "", host: host, port: target?.port ?? 0, path: "",
                                    url: url, tlsMode: target == nil ? .none : .mitm)
        record.clientAddress = context.channel.remoteAddress.map(ExchangeCapture.describe)
        record.status = Int(status.code)
        record.reason = status.reasonPhrase
        record.endedAt = Date()
        record.error = "malformed request: \(why); answered \(status.code)"
        return record
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case let .head(head) where head.status.code >= 200 || head.status.code == 101: responseOpen = true
        case .end: responseOpen = false
        default: break
        }
        context.write(data, promise: promise)
    }
}
