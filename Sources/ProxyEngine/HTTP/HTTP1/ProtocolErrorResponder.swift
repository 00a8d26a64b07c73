import Logging
import NIOCore
import NIOHTTP1

/// NIO's `HTTPServerProtocolErrorHandler`, told apart by cause: a header
/// block over the decoder's limit (64 KiB) gets `431`, anything else
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
    private let hooks: ExchangeHooks
    private let logger: Logger
    /// Where the connection was headed: the CONNECT target when intercepted.
    private let target: ProxyTarget?

    /// The bytes the decoder refused, for the row's method and URL.
    private let tap: RequestLineTap?

    init(hooks: ExchangeHooks, logger: Logger, interceptedTarget: ProxyTarget? = nil, tap: RequestLineTap? = nil) {
        self.hooks = hooks
        self.logger = logger
        target = interceptedTarget
        self.tap = tap
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
        // The connection ended mid-message (the client left, or a timeout
        // closed it): nobody to answer, and no request to record.
        if parse == .invalidEOFState {
            logger.debug("the connection ended in the middle of a request")
            context.fireErrorCaught(error)
            return
        }
        let status: HTTPResponseStatus = parse == .headerOverflow ? .requestHeaderFieldsTooLarge : .badRequest
        let why = Self.explain(parse)
        logger.notice("refused a malformed request", metadata: ["STATUS": "\(status.code)", "ERROR": "\(parse)"])
        let answer = responseOpen ? nil : Self.answer(status, why, allocator: context.channel.allocator)
        if let answer {
            context.write(Self.wrapOutboundOut(.head(answer.head)), promise: nil)
            if let body = answer.body { context.write(Self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
            context.writeAndFlush(Self.wrapOutboundOut(.end(nil)), promise: nil)
        }
        // A request under way is the forward handler's row; this one never parsed.
        if request == .between {
            hooks.requestRefused(line: tap?.refusedRequestLine(), intercepted: target, client: context.channel.remoteAddress, status: status, why: why,
                                 answer: answer)
        }
        context.fireErrorCaught(error)
    }

    /// The answer to a request the decoder refused (the connection closes after it).
    static func answer(_ status: HTTPResponseStatus, _ why: String, allocator: ByteBufferAllocator) -> LocalResponse {
        let body = allocator.buffer(string: "Busymate: \(why)\n")
        let headers = HTTPHeaders([("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(body.readableBytes)")])
        return LocalResponse(head: HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: body)
    }

    /// What the client did wrong, in words it can act on.
    static func explain(_ error: HTTPParserError) -> String {
        switch error {
        case .headerOverflow: return "the request's header block is over the limit (\(headerLimitText))"
        case .invalidURL, .invalidPath, .invalidQueryString, .invalidFragment, .invalidHost, .invalidPort:
            return "the request target has a byte HTTP does not allow there (bytes outside ASCII, spaces and control characters must be percent-encoded)"
        case .invalidMethod: return "the request line does not start with a method this proxy knows (GET, POST, PUT, DELETE, … as registered with IANA)"
        case .invalidVersion: return "the request line is not \"METHOD target HTTP/1.x\" ended by CRLF"
        case .invalidHeaderToken: return "a header name or value has a byte HTTP does not allow"
        case .invalidContentLength: return "Content-Length is not a single number"
        case .unexpectedContentLength: return "Content-Length given twice, or with Transfer-Encoding (a smuggling shape)"
        case .invalidChunkSize: return "a chunk size is not hexadecimal"
        case .unknown:
            // llhttp's codes NIO does not name: in practice framing.
            return "the message framing is not valid (Content-Length with Transfer-Encoding, a Transfer-Encoding that does not end in chunked, or a bad chunk)"
        default: return "malformed HTTP (\(error))"
        }
    }

    /// The decoder's limits: a header block (names and values) over 64 KiB
    /// is refused, as one line over 64 KiB is by Python's http.server and a
    /// block over 64 KiB by nginx's largest default buffers.
    static let headerLimit = 64 << 10
    static let headerLimitText = "64 KiB"

    /// The request decoder both front ends use, with these limits.
    static func requestDecoder() -> ByteToMessageHandler<HTTPRequestDecoder> {
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = headerLimit
        limits.maxHeaderListSize = headerLimit
        return ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, informationalResponseStrategy: .drop, limitConfiguration: limits))
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
