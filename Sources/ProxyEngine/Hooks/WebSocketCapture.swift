import CaptureStore
import Foundation
import NIOCore
import NIOWebSocket

/// One socket's messages as they are recorded: each message's bytes (its
/// first in memory, a large one in the socket's file under `bodies/`, both
/// up to `capture.body_max`), handed to the sink a read burst at a time,
/// after the handshake's row, which went at the `101`. Confined to the
/// connection's event loop.
final class WebSocketCapture {
    private struct Building {
        var record: WebSocketMessageRecord
        var inline: ByteBuffer
    }

    private let writer: any CaptureSink
    private let requestID: String
    private let eventLoop: EventLoop
    private let limit: Int
    private var file: BodyFileWriter?
    private var fileFailed = false
    private var fileSize = 0
    private var seq = 0
    private var up: Building?
    private var down: Building?
    private var batch: [WebSocketMessageRecord] = []
    static let batchLimit = 512

    init(writer: any CaptureSink, requestID: String, eventLoop: EventLoop) {
        self.writer = writer
        self.requestID = requestID
        self.eventLoop = eventLoop
        limit = writer.bodyMax
    }

    /// A message is numbered as it ends: rows are stored in the order of
    /// their numbers, so a reader that pages by number misses none.
    @discardableResult
    private func take(_ building: Building?) -> Int {
        guard var building else { return 0 }
        seq += 1
        building.record.seq = seq
        if building.record.file == nil, building.inline.readableBytes > 0 {
            building.record.payload = Data(building.inline.readableBytesView)
        }
        batch.append(building.record)
        if batch.count >= Self.batchLimit { readComplete() }
        return seq
    }

    /// Bytes kept of a message: in memory up to the inline limit, then the
    /// whole of it (so far) in the socket's file, from where the file ends.
    private func store(_ payload: ByteBuffer, in building: inout Building) {
        // Cut once, cut for good: what follows a lost part would be spliced onto it.
        guard !building.record.truncated else { return }
        let room = limit - building.record.stored
        guard room > 0, payload.readableBytes > 0 else {
            if payload.readableBytes > 0 { building.record.truncated = true }
            return
        }
        var kept = payload
        if kept.readableBytes > room {
            kept = payload.getSlice(at: payload.readerIndex, length: room) ?? payload
            building.record.truncated = true
        }
        if building.record.file == nil, building.inline.readableBytes + kept.readableBytes <= CaptureLimits.inlineBodyLimit {
            building.inline.writeImmutableBuffer(kept)
            building.record.stored += kept.readableBytes
            return
        }
        // The row went (retention, "clear"): its file is written no more.
        if writer.isDropped(socket: requestID) {
            file?.finish()
            (file, fileFailed) = (nil, true)
            building.record.truncated = true
            return
        }
        if building.record.file == nil {
            guard let file = messagesFile(), file.append(building.inline) else {
                building.record.truncated = true
                building.record.stored = building.inline.readableBytes
                return
            }
            building.record.file = file.name
            building.record.fileOffset = fileSize
            fileSize += building.inline.readableBytes
            building.inline = ByteBuffer()
        }
        guard let file, file.append(kept) else {
            building.record.truncated = true
            return
        }
        fileSize += kept.readableBytes
        building.record.stored += kept.readableBytes
    }

    private func messagesFile() -> BodyFileWriter? {
        if file == nil, !fileFailed {
            file = writer.openMessagesFile(requestID: requestID, on: eventLoop)
            fileFailed = file == nil
        }
        return file
    }
}

extension WebSocketCapture: WebSocketObserver {
    func fragment(_ fragment: WebSocketFragment, fromClient: Bool) {
        var building =
            (fromClient ? up : down)
            ?? {
                let record = WebSocketMessageRecord(
                    requestID: requestID, seq: 0, at: Date(), fromClient: fromClient, opcode: fragment.opcode,
                    length: 0, wireLength: 0, frames: 0, compressed: fragment.compressed)
                return Building(record: record, inline: ByteBuffer())
            }()
        building.record.frames += 1
        building.record.length += fragment.payload.readableBytes
        building.record.wireLength += fragment.wire
        store(fragment.payload, in: &building)
        if fragment.last {
            // The message's bytes reach the disk now, before its row is read.
            if building.record.file != nil { file?.flush() }
            take(building)
            if fromClient { up = nil } else { down = nil }
        } else if fromClient {
            up = building
        } else {
            down = building
        }
    }

    func control(_ opcode: WebSocketOpcode, fromClient: Bool) {}

    func message(_ opcode: WebSocketMessageRecord.Opcode, _ payload: ByteBuffer, fromClient: Bool, origin: WebSocketMessageRecord.Origin)
        -> Int?
    {
        var building = Building(
            record: WebSocketMessageRecord(
                requestID: requestID, seq: 0, at: Date(), fromClient: fromClient, opcode: opcode,
                length: payload.readableBytes, wireLength: origin == .dropped ? 0 : payload.readableBytes,
                origin: origin),
            inline: ByteBuffer())
        store(payload, in: &building)
        if building.record.file != nil { file?.flush() }
        let number = take(building)
        readComplete()
        return number
    }

    func readComplete() {
        guard !batch.isEmpty else { return }
        writer.submit(.messages(batch))
        batch.removeAll(keepingCapacity: true)
    }

    func closed(_ closing: WebSocketClosing) {
        // A message cut off by the close is kept as far as it came.
        for var cut in [up, down].compactMap({ $0 }) {
            cut.record.truncated = true
            take(cut)
        }
        (up, down) = (nil, nil)
        readComplete()
        file?.finish()
        writer.submit(
            .closed(
                WebSocketEvent.Closed(
                    requestID: requestID, at: Date(), pings: closing.pings, pongs: closing.pongs,
                    closeCode: closing.closeCode, closeReason: closing.closeReason, closedBy: closing.closedBy,
                    bytesUp: closing.bytesUp, bytesDown: closing.bytesDown, error: closing.error)))
    }

    var isBehind: Bool { writer.isBehind }

    func whenCaughtUp(_ body: @escaping @Sendable () -> Void) { writer.whenCaughtUp(on: eventLoop, body) }
}
