import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import ProxyEngine

@Suite struct BodyFileWriterTests {
    private func store() throws -> (BodyStore, URL) {
        let dir = URL(fileURLWithPath: "/tmp/bmf-\(UInt32.random(in: 0...UInt32.max))")
        let bodies = BodyStore(paths: GroupPaths(root: dir))
        try FileManager.default.createDirectory(at: bodies.directory, withIntermediateDirectories: true)
        return (bodies, dir)
    }

    /// Appends `chunks` on the loop, as a handler does, then finishes.
    private func stream(_ chunks: [ByteBuffer], into writer: BodyFileWriter, on loop: EventLoop) async throws -> (
        accepted: [Bool], result: Result<Int, BodyFileError>
    ) {
        let (accepted, late) = try await loop.submit { () -> ([Bool], Bool) in
            let taken = chunks.map { writer.append($0) }
            writer.finish()
            // Ended is ended: more bytes are refused, and a second finish changes nothing.
            let late = writer.append(ByteBuffer(string: "late"))
            writer.finish()
            return (taken, late)
        }.get()
        #expect(!late)
        return (accepted, try await writer.written.get())
    }

    @Test func blocksLandInOrderAndTheBacklogEmpties() async throws {
        let (bodies, dir) = try store()
        defer { try? FileManager.default.removeItem(at: dir) }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let backlog = BodyFileWriter.Backlog(limit: 32 << 20)
        let writer = BodyFileWriter(store: bodies, requestID: "r1", direction: .response, backlog: backlog, spares: nil, eventLoop: loop)
        // 700 chunks of odd sizes: several blocks, the last one partial.
        let payload = (0..<(700 * 1009)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let chunks = stride(from: 0, to: payload.count, by: 1009).map { ByteBuffer(bytes: payload[$0..<min($0 + 1009, payload.count)]) }
        let (accepted, result) = try await stream(chunks, into: writer, on: loop)
        #expect(accepted.allSatisfy { $0 })
        #expect(try result.get() == payload.count)
        #expect(try Data(contentsOf: bodies.url(writer.name)) == Data(payload))
        #expect(backlog.bytes.load(ordering: .relaxed) == 0)
    }

    @Test func aFileThatCannotBeWrittenIsReportedAndLeavesNothing() async throws {
        let (bodies, dir) = try store()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.removeItem(at: bodies.directory)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let backlog = BodyFileWriter.Backlog(limit: 32 << 20)
        let writer = BodyFileWriter(store: bodies, requestID: "r2", direction: .request, backlog: backlog, spares: nil, eventLoop: loop)
        let chunks = (0..<40).map { _ in ByteBuffer(repeating: 0x61, count: 10_000) }
        let (_, result) = try await stream(chunks, into: writer, on: loop)
        guard case let .failure(error) = result else {
            Issue.record("a body file under a missing directory was reported written")
            return
        }
        #expect(error.description.contains("cannot create"))
        #expect(!FileManager.default.fileExists(atPath: bodies.url(writer.name).path))
        #expect(backlog.bytes.load(ordering: .relaxed) == 0)
    }

    @Test func pastTheBacklogAppendsAreRefused() async throws {
        let (bodies, dir) = try store()
        defer { try? FileManager.default.removeItem(at: dir) }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let backlog = BodyFileWriter.Backlog(limit: 64 * 1024)
        let writer = BodyFileWriter(store: bodies, requestID: "r3", direction: .response, backlog: backlog, spares: nil, eventLoop: loop)
        // Nothing reaches the disk before the loop is let go: the fourth 20 KB chunk is over 64 KiB.
        let chunks = (0..<4).map { _ in ByteBuffer(repeating: 0x62, count: 20_000) }
        let (accepted, result) = try await stream(chunks, into: writer, on: loop)
        #expect(accepted == [true, true, true, false])
        #expect(try result.get() == 60_000)
        #expect(backlog.bytes.load(ordering: .relaxed) == 0)
    }

    @Test func aPrunedFileIsWrittenOverAndCutToTheNewBodysSize() async throws {
        let (bodies, dir) = try store()
        defer { try? FileManager.default.removeItem(at: dir) }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let backlog = BodyFileWriter.Backlog(limit: 32 << 20)
        let spares = SpareBodyFiles(store: bodies)
        let old = BodyFileWriter(store: bodies, requestID: "old", direction: .response, backlog: backlog, spares: spares, eventLoop: loop)
        _ = try await stream((0..<30).map { _ in ByteBuffer(repeating: 0x6F, count: 10_000) }, into: old, on: loop)
        let oldInode = try FileManager.default.attributesOfItem(atPath: bodies.url(old.name).path)[.systemFileNumber] as? Int
        spares.retire([old.name])
        #expect(!FileManager.default.fileExists(atPath: bodies.url(old.name).path))

        let new = BodyFileWriter(store: bodies, requestID: "new", direction: .response, backlog: backlog, spares: spares, eventLoop: loop)
        let (_, result) = try await stream((0..<5).map { _ in ByteBuffer(repeating: 0x6E, count: 10_000) }, into: new, on: loop)
        #expect(try result.get() == 50_000)
        let attributes = try FileManager.default.attributesOfItem(atPath: bodies.url(new.name).path)
        #expect(attributes[.systemFileNumber] as? Int == oldInode, "the spare's inode is reused")
        #expect(try Data(contentsOf: bodies.url(new.name)) == Data(repeating: 0x6E, count: 50_000))
        // Nothing left over but the new body; a leftover spare would be swept as an orphan.
        #expect(try FileManager.default.contentsOfDirectory(atPath: bodies.directory.path) == [new.name])
        #expect(!spares.take(as: bodies.url("x.response").path))
    }
}
