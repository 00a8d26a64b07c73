import NIOCore

/// The client's bytes a router holds while no layer is there to take them:
/// in order, with the half-close that came after them and whether a read
/// was asked for meanwhile and withheld (backpressure). Handed on to the
/// next layer as the router leaves.
struct HeldBytes {
    private(set) var parts: [NIOAny] = []
    private(set) var inputClosed = false
    private(set) var readWithheld = false

    mutating func append(_ data: NIOAny) { parts.append(data) }

    mutating func closeInput() { inputClosed = true }

    mutating func withholdRead() { readWithheld = true }

    /// Delivers what was held to the next handler: the bytes, the
    /// half-close, and the read withheld when the next layer reads
    /// (`resumeReading`; not after a refusal).
    mutating func handOn(_ context: ChannelHandlerContext, resumeReading: Bool) {
        let bytes = parts
        parts = []
        for data in bytes { context.fireChannelRead(data) }
        if !bytes.isEmpty { context.fireChannelReadComplete() }
        if inputClosed { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
        if readWithheld, resumeReading { context.read() }
    }
}
