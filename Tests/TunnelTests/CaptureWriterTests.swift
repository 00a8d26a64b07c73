import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing
@testable import ProxyEngine
@testable import Tunnel

@Suite struct CaptureWriterTests {
    private func writer() throws -> (CaptureWriter, TrafficRepository, URL) {
        let dir = URL(fileURLWithPath: "/tmp/bmw-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let database = try CaptureDatabase(paths: GroupPaths(root: dir))
        return (CaptureWriter(database: database, notifier: nil), TrafficRepository(database: database), dir)
    }

    private func record(_ i: Int) -> ExchangeRecord {
        ExchangeRecord(scheme: "http", method: "GET", host: "h", port: 80, path: "/\(i)", url: "http://h/\(i)", tlsMode: .none)
    }

    @Test func theProxyIsHeldBackWhileTheStoreIsBehindAndLetGoOnceItCatchesUp() async throws {
        let (writer, traffic, dir) = try writer()
        defer { try? FileManager.default.removeItem(at: dir) }
        for i in 0..<CaptureWriter.highWater { writer.submit(record(i)) }
        #expect(!writer.isBehind)
        writer.submit(record(CaptureWriter.highWater))
        #expect(writer.isBehind)
        await writer.flush()
        #expect(!writer.isBehind)
        #expect(try traffic.count() == CaptureWriter.highWater + 1)
    }

    @Test func aStoreThatCannotWriteDoesNotHoldTheProxyBackAndLosesNothing() async throws {
        let (writer, traffic, dir) = try writer()
        defer { try? FileManager.default.removeItem(at: dir) }
        // Every insert fails, as on a full disk.
        let other = try CaptureDatabase(paths: GroupPaths(root: dir))
        try await other.pool.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON exchanges BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
        }
        for i in 0...CaptureWriter.highWater { writer.submit(record(i)) }
        #expect(writer.isBehind)
        await writer.flush()
        #expect(!writer.isBehind, "a failing store must not stall all traffic")
        #expect(try traffic.count() == 0)
        // The disk has room again: everything kept is written.
        try await other.pool.write { db in try db.execute(sql: "DROP TRIGGER refuse") }
        await writer.flush()
        #expect(try traffic.count() == CaptureWriter.highWater + 1)
    }

    @Test func heldConnectionsAreWokenByTheCommitThatCatchesUp() async throws {
        let (writer, _, dir) = try writer()
        defer { try? FileManager.default.removeItem(at: dir) }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        for i in 0...CaptureWriter.highWater { writer.submit(record(i)) }
        let woken = Atomic<Int>(0)
        let done = loop.makePromise(of: Void.self)
        writer.whenCaughtUp(on: loop) {
            woken.add(1, ordering: .relaxed)
            done.succeed()
        }
        // Still behind: nothing may wake it but the writer.
        try await Task.sleep(for: .milliseconds(50))
        #expect(woken.load(ordering: .relaxed) == 0)
        await writer.flush()
        try await done.futureResult.get()
        #expect(woken.load(ordering: .relaxed) == 1)
        // Not behind: at once.
        let immediate = loop.makePromise(of: Void.self)
        writer.whenCaughtUp(on: loop) { immediate.succeed() }
        try await immediate.futureResult.get()
    }
}
