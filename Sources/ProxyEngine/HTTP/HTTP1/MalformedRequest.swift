import NIOCore
import NIOHTTP1

/// What the proxy says to a request its decoder refused, and the decoder's
/// limits. A header block over the limit gets `431`, anything else
/// malformed `400` (as NIO's `HTTPServerProtocolErrorHandler` would, told
/// apart by cause).
enum MalformedRequest {
    /// The answer to a request the decoder refused (the connection closes after it).
    static func answer(_ status: HTTPResponseStatus, _ why: String, allocator: ByteBufferAllocator) -> LocalResponse {
        let body = allocator.buffer(string: "Busymate: \(why)\n")
        let headers = HTTPHeaders([
            ("Connection", "close"), ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(body.readableBytes)"),
        ])
        return LocalResponse(head: HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: body)
    }

    /// What the client did wrong, in words it can act on.
    static func explain(_ error: HTTPParserError) -> String {
        switch error {
        case .headerOverflow: return "the request's header block is over the limit (\(headerLimitText))"
        case .invalidURL, .invalidPath, .invalidQueryString, .invalidFragment, .invalidHost, .invalidPort:
            return
                "the request target has a byte HTTP does not allow there (bytes outside ASCII, spaces and control characters must be percent-encoded)"
        case .invalidMethod:
            return "the request line does not start with a method this proxy knows (GET, POST, PUT, DELETE, … as registered with IANA)"
        case .invalidVersion: return "the request line is not \"METHOD target HTTP/1.x\" ended by CRLF"
        case .invalidHeaderToken: return "a header name or value has a byte HTTP does not allow"
        case .invalidContentLength: return "Content-Length is not a single number"
        case .unexpectedContentLength: return "Content-Length given twice, or with Transfer-Encoding (a smuggling shape)"
        case .invalidChunkSize: return "a chunk size is not hexadecimal"
        case .unknown:
            // llhttp's codes NIO does not name: in practice framing.
            return
                "the message framing is not valid (Content-Length with Transfer-Encoding, a Transfer-Encoding that does not end in chunked, or a bad chunk)"
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
        return ByteToMessageHandler(
            HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes, informationalResponseStrategy: .drop, limitConfiguration: limits))
    }
}
