import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A short plain-text answer from the proxy itself (a 4xx or 5xx).
struct ProxyReply {
    static func write(
        _ status: HTTPResponseStatus, _ text: String, close: Bool, context: ChannelHandlerContext,
        wrap: (HTTPServerResponsePart) -> NIOAny
    ) {
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count + 1)
        buffer.writeString(text + "\n")
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        headers.add(name: "Content-Length", value: "\(buffer.readableBytes)")
        headers.add(name: "Via", value: "1.1 \(LoopGuard.shared.pseudonym)")
        if close { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: status, headers: headers)
        context.write(wrap(.head(head)), promise: nil)
        context.write(wrap(.body(.byteBuffer(buffer))), promise: nil)
        let done = context.writeAndFlush(wrap(.end(nil)))
        if close {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
