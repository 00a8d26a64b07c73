import NIOCore

/// Sits before the HTTP decoder, tells the connection's clock that bytes
/// came, and keeps a reference (not a copy) to the
/// bytes being decoded, only while they are: when the decoder refuses a
/// request, `HTTP1ServerConnection` reads the refused request line from
/// here, so its row still says which method and URL were refused.
/// Between requests it percent-encodes raw bytes outside ASCII in a request
/// line's target (`RequestTargetEncoder`), which the decoder would refuse,
/// and keeps the targets it changed for the exchange's row. A request line
/// that comes in pieces is held until it ends (the decoder could do nothing
/// with it before), up to `holdLimit`.
final class RequestLineTap: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var decoding: ByteBuffer?
    /// The start of a request line whose end has not come.
    private var held: ByteBuffer?
    static let holdLimit = 64 << 10
    /// Told when bytes arrive: a request head's clock starts at its first byte.
    weak var connection: HTTP1ServerConnection?

    /// Targets percent-encoded here, oldest first, until their exchange takes its note.
    private var encodedTargets: [String] = []

    init() {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection?.bytesArrived()
        var buffer = Self.unwrapInboundIn(data)
        if var start = held {
            held = nil
            start.writeBuffer(&buffer)
            buffer = start
        }
        // Only where a request line may begin: no request is being read.
        if connection?.readingRequest == false {
            if buffer.readableBytes < Self.holdLimit, RequestTargetEncoder.awaitsRestOfLine(buffer) {
                held = buffer
                return
            }
            if let (encoded, target) = RequestTargetEncoder.encode(buffer) {
                buffer = encoded
                if encodedTargets.count >= 16 { encodedTargets.removeFirst() }
                encodedTargets.append(target)
            }
        }
        pass(buffer, context: context)
    }

    private func pass(_ buffer: ByteBuffer, context: ChannelHandlerContext) {
        decoding = buffer
        context.fireChannelRead(Self.wrapInboundOut(buffer))
        decoding = nil
    }

    /// What is held goes to the decoder before the end of input, so it
    /// refuses or times out the partial line as it would have.
    private func release(context: ChannelHandlerContext) {
        guard let buffer = held else { return }
        held = nil
        pass(buffer, context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .inputClosed = event as? ChannelEvent { release(context: context) }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        release(context: context)
        context.fireChannelInactive()
    }

    func removeHandler(context: ChannelHandlerContext, removalToken: ChannelHandlerContext.RemovalToken) {
        release(context: context)
        context.leavePipeline(removalToken: removalToken)
    }

    /// Whether `target` is one this tap percent-encoded (then it is taken).
    func takeEncoded(_ target: String) -> Bool {
        guard let i = encodedTargets.firstIndex(of: target) else { return false }
        encodedTargets.remove(at: i)
        return true
    }

    /// The last line in the bytes under decoding that reads as a request
    /// line (`METHOD SP target SP HTTP/x.y`): method and target as sent.
    func refusedRequestLine() -> (method: String, target: String)? {
        guard let buffer = decoding else { return nil }
        return buffer.withUnsafeReadableBytes { Self.lastRequestLine(in: $0) }
    }

    static func lastRequestLine(in bytes: UnsafeRawBufferPointer) -> (method: String, target: String)? {
        var found: (String, String)?
        var lineStart = 0
        // Only the first 64 KiB: a request line is short, a body need not be.
        let end = min(bytes.count, 64 << 10)
        var i = 0
        while i <= end {
            if i == end || bytes[i] == 0x0A {
                if let line = parse(UnsafeRawBufferPointer(rebasing: bytes[lineStart..<i])) { found = line }
                lineStart = i + 1
            }
            i += 1
        }
        return found
    }

    private static func parse(_ line: UnsafeRawBufferPointer) -> (String, String)? {
        var line = line
        if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        guard let firstSpace = line.firstIndex(of: 0x20), firstSpace > 0, let lastSpace = line.lastIndex(of: 0x20),
            lastSpace > firstSpace + 1,
            line[(lastSpace + 1)...].starts(with: Array("HTTP/".utf8)),
            line[..<firstSpace].allSatisfy(UpstreamRequestValidator.isTokenByte)
        else { return nil }
        let method = String(decoding: UnsafeRawBufferPointer(rebasing: line[..<firstSpace]), as: UTF8.self)
        let target = String(decoding: UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)..<lastSpace]), as: UTF8.self)
        return (method, target)
    }
}
