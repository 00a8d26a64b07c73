import NIOCore
import NIOHTTP1

/// The client end of one exchange, as `HTTPExchangeHandler` uses it: an
/// HTTP/1 connection (`ContextClient`, the handler's own context) or an
/// HTTP/2 stream. Confined to its event loop.
protocol ExchangeClient: AnyObject {
    var eventLoop: EventLoop { get }
    var allocator: ByteBufferAllocator { get }
    var remoteAddress: SocketAddress? { get }
    /// Whether it takes more of the response now.
    var isWritable: Bool { get }
    func write(_ part: HTTPServerResponsePart, promise: EventLoopPromise<Void>?)
    func flush()
    /// More of the request, please (the exchange holds this while the other side cannot take more).
    func read()
    func close()
    /// A drop rule: the client gets no answer (an HTTP/1 connection closes; an HTTP/2 stream is reset).
    func hangUp()
    /// The client has had its last answer (an HTTP/1 connection closes; an
    /// HTTP/2 stream whose request has not ended is told to stop sending).
    func closeFinished()
}
