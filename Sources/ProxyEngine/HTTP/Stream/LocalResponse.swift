import BusymateShared
import NIOCore
import NIOHTTP1
import NIOSSL

/// An answer the proxy makes itself: a short text (errors, refusals,
/// blocks) or a mapped file.
struct LocalResponse {
    var head: HTTPResponseHead
    var body: ByteBuffer?

    static func text(_ status: HTTPResponseStatus, _ text: String, allocator: ByteBufferAllocator) -> LocalResponse {
        var buffer = allocator.buffer(capacity: text.utf8.count + 12)
        buffer.writeString("Busymate: \(text)\n")
        let headers = HTTPHeaders([
            ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "\(buffer.readableBytes)"),
            ("Via", "1.1 \(LoopGuard.shared.pseudonym)"),
        ])
        return LocalResponse(head: HTTPResponseHead(version: .http1_1, status: status, headers: headers), body: buffer)
    }
}
