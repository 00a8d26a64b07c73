import CaptureStore
import Foundation
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Streams one body into its file under `bodies/`. The handler appends on
/// its event loop and never waits: chunks are copied into a block (which
/// lets the TLS layer reuse its buffer at once), and each full block is
/// written with `pwrite` on NIO's blocking pool, one block in flight per
/// file so they land in order. A chunk per pool trip cost two thread hops
/// per TLS record. A failed file (a full disk) is removed and reported
/// through `written`; forwarding never notices. Bytes not yet on disk count
/// against a backlog shared by all bodies: past its limit `append` refuses,
/// so a disk slower than the network costs stored bytes, not memory.
///
/// Not NIOFileSystem: a writer task per file, awaiting each block, cost
/// about 13 % of the 1 MiB download's throughput (median of 10 alternated
/// bench rounds, 226 against 260 MB/s); NonBlockingFileIO's file handles
/// are deprecated in its favour, and its `write` is this `pwrite` on this pool.
public final class BodyFileWriter: Sendable {
    public let name: String
    /// The body's direction; nil for a WebSocket's messages file.
    public let direction: BodyStore.Direction?
    /// Bytes written once the body has ended, or why the file was given up.
    public var written: EventLoopFuture<Result<Int, BodyFileError>> { done.futureResult }

    static let blockSize = 128 * 1024

    /// Bytes handed to body files and not yet written, for all of them.
    public final class Backlog: Sendable {
        let bytes = Atomic<Int>(0)
        let limit: Int
        public init(limit: Int) { self.limit = limit }
    }

    private struct State {
        var block = ByteBuffer()
        /// Where `block` goes in the file.
        var offset = 0
        /// The open file, and the last block's write.
        var descriptor: EventLoopFuture<Int32>?
        var tail: EventLoopFuture<Void>?
        /// `done` is fulfilled once: a second finish is ignored.
        var finished = false
    }

    private let path: String
    private let backlog: Backlog
    private let spares: SpareBodyFiles?
    private let eventLoop: EventLoop
    private let state: NIOLoopBoundBox<State>
    private let done: EventLoopPromise<Result<Int, BodyFileError>>

    public convenience init(
        store: BodyStore, requestID: String, direction: BodyStore.Direction, backlog: Backlog, spares: SpareBodyFiles?,
        eventLoop: EventLoop
    ) {
        self.init(
            store: store, name: BodyStore.fileName(requestID: requestID, direction), direction: direction, backlog: backlog, spares: spares,
            eventLoop: eventLoop)
    }

    public init(
        store: BodyStore, name: String, direction: BodyStore.Direction?, backlog: Backlog, spares: SpareBodyFiles?, eventLoop: EventLoop
    ) {
        self.name = name
        path = store.url(name).path
        self.direction = direction
        self.backlog = backlog
        self.spares = spares
        self.eventLoop = eventLoop
        state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
        done = eventLoop.makePromise()
    }

    /// False (nothing taken) when the disk is too far behind.
    func append(_ buffer: ByteBuffer) -> Bool {
        guard !state.value.finished else { return false }
        let n = buffer.readableBytes
        guard backlog.bytes.add(n, ordering: .relaxed).newValue <= backlog.limit else {
            backlog.bytes.subtract(n, ordering: .relaxed)
            return false
        }
        if state.value.block.capacity == 0 { state.value.block.reserveCapacity(Self.blockSize) }
        state.value.block.writeImmutableBuffer(buffer)
        if state.value.block.readableBytes >= Self.blockSize { writeBlock() }
        return true
    }

    /// Writes what the block holds now, full or not: a WebSocket message's
    /// bytes go to disk at its end, so a reader finds them while the socket is open.
    func flush() {
        guard !state.value.finished else { return }
        writeBlock()
    }

    /// The body has ended (or the exchange has): write what is left, close the file.
    func finish() {
        guard !state.value.finished else { return }
        state.value.finished = true
        writeBlock()
        let (path, done, total) = (path, done, state.value.offset)
        guard let tail = state.value.tail, let descriptor = state.value.descriptor else {
            done.succeed(.success(0))
            return
        }
        let (pool, eventLoop) = (NIOThreadPool.singleton, eventLoop)
        @Sendable func fail(_ error: Error) {
            pool.runIfActive(eventLoop: eventLoop) { unlink(path) }.whenComplete { _ in
                done.succeed(.failure(error as? BodyFileError ?? BodyFileError(description: "\(path): \(error)")))
            }
        }
        // The writes end before the descriptor is closed; a reused file may be
        // longer than this body, so it is cut to size.
        tail.whenComplete { written in
            descriptor.whenComplete { opened in
                guard case let .success(fd) = opened else {
                    if case let .failure(error) = opened { fail(error) }
                    return
                }
                pool.runIfActive(eventLoop: eventLoop) { () throws -> Void in
                    defer { close(fd) }
                    try written.get()
                    guard ftruncate(fd, off_t(total)) == 0 else {
                        throw BodyFileError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
                    }
                }.whenComplete { result in
                    switch result {
                    case .success: done.succeed(.success(total))
                    case let .failure(error): fail(error)
                    }
                }
            }
        }
    }

    private func writeBlock() {
        let block = state.value.block
        guard block.readableBytes > 0 else { return }
        let offset = state.value.offset
        state.value.offset += block.readableBytes
        state.value.block = ByteBuffer()
        let (path, pool, eventLoop, backlog, spares) = (path, NIOThreadPool.singleton, eventLoop, backlog, spares)
        let descriptor = state.value.descriptor ?? pool.runIfActive(eventLoop: eventLoop) { try Self.create(path, spares: spares) }
        state.value.descriptor = descriptor
        let previous = state.value.tail ?? eventLoop.makeSucceededVoidFuture()
        let next = previous.and(descriptor).flatMap { _, fd in
            pool.runIfActive(eventLoop: eventLoop) { try Self.write(fd, block, at: offset, path: path) }
        }
        next.whenComplete { _ in backlog.bytes.subtract(block.readableBytes, ordering: .relaxed) }
        state.value.tail = next
    }

    /// A spare written over from the start (cut to size at the end), else a new file.
    private static func create(_ path: String, spares: SpareBodyFiles?) throws -> Int32 {
        if spares?.take(as: path) == true {
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            if fd >= 0 { return fd }
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw BodyFileError(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        return fd
    }

    private static func write(_ fd: Int32, _ buffer: ByteBuffer, at offset: Int, path: String) throws {
        try buffer.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress else { return }
            var done = 0
            while done < raw.count {
                let n = pwrite(fd, base.advanced(by: done), raw.count - done, off_t(offset + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BodyFileError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                done += n
            }
        }
    }
}

public struct BodyFileError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
