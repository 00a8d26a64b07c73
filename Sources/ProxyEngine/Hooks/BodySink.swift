import CaptureStore
import NIOCore

/// What is kept of one body as it streams past: the first bytes in the row,
/// all of it (up to `capture.body_max`) in a file once it outgrows the row.
/// Confined to its connection's event loop, like its handler.
struct BodySink: Sendable {
    let direction: BodyStore.Direction
    let limit: Int
    private(set) var inline: [UInt8] = []
    private(set) var file: BodyFileWriter?
    /// Bytes stored (inline, or in the file when there is one).
    private(set) var stored = 0
    private(set) var truncated = false
    /// The disk fell behind (see `BodyFileWriter.Backlog`): what is stored ends here.
    private var stalled = false

    init(direction: BodyStore.Direction, limit: Int) {
        self.direction = direction
        self.limit = limit
    }

    mutating func append(_ buffer: ByteBuffer, openFile: () -> BodyFileWriter?) {
        let room = stalled ? 0 : limit - stored
        guard room > 0 else {
            if buffer.readableBytes > 0 { truncated = true }
            return
        }
        let kept = buffer.readableBytes > room ? buffer.getSlice(at: buffer.readerIndex, length: room) ?? buffer : buffer
        if kept.readableBytes < buffer.readableBytes { truncated = true }
        if file == nil, stored + kept.readableBytes <= CaptureLimits.inlineBodyLimit {
            inline += kept.readableBytesView
            stored += kept.readableBytes
            return
        }
        if file == nil {
            guard let opened = openFile() else {
                truncated = true
                return
            }
            // The file holds the whole body; the row keeps its beginning.
            guard opened.append(ByteBuffer(bytes: inline)) else {
                opened.finish()
                stalled = true
                truncated = true
                return
            }
            file = opened
            let head = CaptureLimits.inlineBodyLimit - inline.count
            inline += kept.readableBytesView.prefix(head)
        }
        guard file?.append(kept) == true else {
            stalled = true
            truncated = true
            return
        }
        stored += kept.readableBytes
    }

    /// Closes the file, if any; its writer reports how it went.
    func finish() { file?.finish() }
}
