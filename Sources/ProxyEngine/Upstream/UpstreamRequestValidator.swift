import BusymateShared
import NIOCore
import NIOHTTP1

/// Checks what goes upstream for what could split or smuggle a request:
/// control bytes and spaces in the target, CR, LF or NUL in a header, a
/// method that is not a token. It lets everything else through as the
/// client sent it, as mitmproxy does: NIO's `NIOHTTPRequestHeadersValidator`
/// refuses `|`, `^`, `"` and the like that browsers and curl send and
/// origins accept (the request was then never answered).
final class UpstreamRequestValidator: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    struct Refused: Error, CustomStringConvertible {
        var description: String
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let problem: String?
        switch Self.unwrapOutboundIn(data) {
        case let .head(head): problem = Self.problem(head)
        case let .end(trailers?): problem = Self.problem(trailers)
        case .body, .end(nil): problem = nil
        }
        if let problem {
            let error = Refused(description: problem)
            promise?.fail(error)
            context.fireErrorCaught(error)
            return
        }
        context.write(data, promise: promise)
    }

    static func problem(_ head: HTTPRequestHead) -> String? {
        if head.uri.isEmpty || !head.uri.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) {
            return "the request target is empty or has a space or control byte"
        }
        if head.method.rawValue.isEmpty || !head.method.rawValue.utf8.allSatisfy(isTokenByte) {
            return "the method is not an HTTP token"
        }
        return problem(head.headers)
    }

    static func problem(_ headers: HTTPHeaders) -> String? {
        for (name, value) in headers {
            if name.isEmpty || !name.utf8.allSatisfy(isTokenByte) { return "a header name is not an HTTP token" }
            if value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }) {
                return "the header \(name) has CR, LF or NUL in its value"
            }
        }
        return nil
    }

    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ byte: UInt8) -> Bool { HTTPToken.isTokenByte(byte) }
}
