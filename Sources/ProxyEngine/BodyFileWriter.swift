import CaptureStore
import NIOCore
import NIOFileSystem
import Synchronization

/// Streams one body into its file under `bodies/`. The handler appends on
/// its event loop and never waits: chunks are copied into a block (which
/// lets the TLS layer reuse its buffer at once), and each full block goes
/// to the file's writer, a task that writes blocks in order through
/// NIOFileSystem. A chunk per write cost two thread hops per TLS record. A
/// failed file (a full disk) is removed and reported through `written`;
/// forwarding never notices. Bytes not yet on disk count against a backlog
/// shared by all bodies: past its limit `append` refuses, so a disk slower
/// than the network costs stored bytes, not memory.
public final class BodyFileWriter: Sendable {
    public let name: String
    public let direction: BodyStore.Direction
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
        /// The writer's queue, once the first block is full or the body ends.
        var blocks: AsyncStream<ByteBuffer>.Continuation?
        /// `done` is fulfilled once: a second finish is ignored.
        var finished = false
    }

    private let path: String
    private let backlog: Backlog
    private let spares: SpareBodyFiles?
    private let state: NIOLoopBoundBox<State>
    private let done: EventLoopPromise<Result<Int, BodyFileError>>

    public init(store: BodyStore, requestID: String, direction: BodyStore.Direction, backlog: Backlog, spares: SpareBodyFiles?, eventLoop: EventLoop) {
        name = BodyStore.fileName(requestID: requestID, direction)
        path = store.url(name).path
        self.direction = direction
        self.backlog = backlog
        self.spares = spares
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
        if state.value.block.readableBytes >= Self.blockSize { sendBlock() }
        return true
    }

    /// The body has ended (or the exchange has): write what is left, close the file.
    func finish() {
        guard !state.value.finished else { return }
        state.value.finished = true
        sendBlock()
        guard let blocks = state.value.blocks else {
            done.succeed(.success(0))
            return
        }
        blocks.finish()
    }

    private func sendBlock() {
        let block = state.value.block
        guard block.readableBytes > 0 else { return }
        state.value.block = ByteBuffer()
        if state.value.blocks == nil { state.value.blocks = startWriter() }
        state.value.blocks?.yield(block)
    }

    /// The file's writer: opens it (a spare written over from the start, else
    /// a new file), writes each block where it goes, cuts the file to size
    /// (a spare may be longer), closes it. Blocks after a failure are only
    /// counted off the backlog.
    private func startWriter() -> AsyncStream<ByteBuffer>.Continuation {
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        let (path, backlog, spares, done) = (path, backlog, spares, done)
        Task {
            let file = FilePath(path)
            var failure: BodyFileError?
            var handle: WriteFileHandle?
            do {
                _ = await spares?.take(as: path)
                handle = try await FileSystem.shared.openFile(forWritingAt: file, options: .modifyFile(createIfNecessary: true, permissions: Self.mode))
            } catch {
                failure = BodyFileError(description: "cannot create \(path): \(Self.reason(error))")
            }
            var total = 0
            for await block in stream {
                if failure == nil, let handle {
                    do {
                        try await handle.write(contentsOf: block, toAbsoluteOffset: Int64(total))
                        total += block.readableBytes
                    } catch {
                        failure = BodyFileError(description: "cannot write \(path): \(Self.reason(error))")
                    }
                }
                backlog.bytes.subtract(block.readableBytes, ordering: .relaxed)
            }
            if let handle {
                do {
                    if failure == nil { try await handle.resize(to: .bytes(Int64(total))) }
                    try await handle.close()
                } catch {
                    failure = failure ?? BodyFileError(description: "cannot write \(path): \(Self.reason(error))")
                }
            }
            if let failure {
                _ = try? await FileSystem.shared.removeItem(at: file, strategy: .platformDefault, recursively: false)
                done.succeed(.failure(failure))
            } else {
                done.succeed(.success(total))
            }
        }
        return continuation
    }

    /// rw-r-----: the group reads bodies, others do not.
    private static let mode: FilePermissions = [.ownerReadWrite, .groupRead]

    /// The system's words for a file error, without NIOFileSystem's source locations.
    private static func reason(_ error: Error) -> String {
        guard let error = error as? FileSystemError else { return "\(error)" }
        if let cause = error.cause as? FileSystemError.SystemCallError { return "\(cause.errno)" }
        return error.message
    }
}

public struct BodyFileError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
