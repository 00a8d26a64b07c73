import CaptureStore
import Foundation
import NIOCore
import NIOPosix
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Streams one body into its file under `bodies/` off the event loop: the
/// handler appends and never waits; one task writes the chunks in order on
/// NIO's blocking pool. A failed file (a full disk) is removed and reported
/// through `written`; forwarding never notices. Bytes waiting for the disk
/// count against a backlog shared by all bodies: past its limit `append`
/// refuses, so a disk slower than the network costs stored bytes, not memory.
final class BodyFileWriter: Sendable {
    let name: String
    let direction: BodyStore.Direction
    private let chunks: AsyncStream<ByteBuffer>.Continuation
    private let backlog: Backlog

    /// Bytes handed to body files and not yet written, for all of them.
    final class Backlog: Sendable {
        let bytes = Atomic<Int>(0)
        let limit: Int
        init(limit: Int) { self.limit = limit }
    }
    /// Bytes written once the body has ended, or why the file was given up.
    let written: Task<Result<Int, BodyFileError>, Never>

    init(store: BodyStore, requestID: String, direction: BodyStore.Direction, backlog: Backlog) {
        let name = BodyStore.fileName(requestID: requestID, direction)
        let path = store.url(name).path
        self.name = name
        self.direction = direction
        self.backlog = backlog
        let (stream, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
        chunks = continuation
        written = Task {
            let pool = NIOThreadPool.singleton
            var fd: Int32 = -1
            var total = 0
            var failure: BodyFileError?
            for await chunk in stream {
                defer { backlog.bytes.subtract(chunk.readableBytes, ordering: .relaxed) }
                // After a failure the rest is drained and dropped.
                guard failure == nil else { continue }
                do {
                    if fd < 0 { fd = try await pool.runIfActive { try Self.create(path) } }
                    let descriptor = fd
                    try await pool.runIfActive { try Self.writeAll(descriptor, chunk, path: path) }
                    total += chunk.readableBytes
                } catch let error as BodyFileError {
                    failure = error
                } catch {
                    failure = BodyFileError(description: "\(path): \(error)")
                }
            }
            if fd >= 0 { close(fd) }
            if let failure {
                unlink(path)
                return .failure(failure)
            }
            return .success(total)
        }
    }

    /// False (nothing taken) when the disk is too far behind.
    func append(_ buffer: ByteBuffer) -> Bool {
        let n = buffer.readableBytes
        guard backlog.bytes.add(n, ordering: .relaxed).newValue <= backlog.limit else {
            backlog.bytes.subtract(n, ordering: .relaxed)
            return false
        }
        chunks.yield(buffer)
        return true
    }

    /// The body has ended (or the exchange has): close the file.
    func finish() { chunks.finish() }

    private static func create(_ path: String) throws -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw BodyFileError(description: "cannot create \(path): \(String(cString: strerror(errno)))") }
        return fd
    }

    private static func writeAll(_ fd: Int32, _ buffer: ByteBuffer, path: String) throws {
        try buffer.withUnsafeReadableBytes { raw in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                let n = write(fd, base.advanced(by: offset), raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BodyFileError(description: "cannot write \(path): \(String(cString: strerror(errno)))")
                }
                offset += n
            }
        }
    }
}

struct BodyFileError: Error, CustomStringConvertible {
    var description: String
}
