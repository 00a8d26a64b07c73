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

    @Test func bodyFilesNoRowNamesAreSweptWhileCaptureGoesOn() async throws {
        let dir = URL(fileURLWithPath: "/tmp/bmw-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = try CaptureDatabase(paths: GroupPaths(root: dir))
        let writer = CaptureWriter(store: StoreHandle(database), notifier: nil, sweepInterval: .zero)
        let running = Task { await writer.run() }
        // Past the sweep at start: a first exchange is stored.
        writer.submit(record(0))
        let clock = ContinuousClock()
        let started = clock.now + .seconds(5)
        while (try? TrafficRepository(database: database).count()) != 1 && clock.now < started {
            try await Task.sleep(for: .milliseconds(20))
        }
        // What a web front's "clear" leaves in the sticky bodies/: files whose rows are gone.
        let bodies = dir.appendingPathComponent("bodies")
        try FileManager.default.createDirectory(at: bodies, withIntermediateDirectories: true)
        let orphan = bodies.appendingPathComponent("cleared.response")
        try Data("left behind".utf8).write(to: orphan)
        // And one of an exchange still open (a slow upload's body, as old).
        let inFlight = bodies.appendingPathComponent("still-open.request")
        try Data("uploading".utf8).write(to: inFlight)
        writer.open?.opened(
            OpenExchangesFile.Entry(requestID: "still-open", startedAt: Date(), method: "POST", url: "http://h/up", client: nil))
        for path in [orphan.path, inFlight.path] {
            var old = [timeval(tv_sec: time(nil) - 7200, tv_usec: 0), timeval(tv_sec: time(nil) - 7200, tv_usec: 0)]
            #expect(utimes(path, &old) == 0)
        }
        // Capture goes on; each commit may sweep. The sweep waits for NIO's
        // thread pool, which other suites keep busy on a 2-core machine.
        let deadline = clock.now + .seconds(60)
        var next = 1
        while FileManager.default.fileExists(atPath: orphan.path) && clock.now < deadline {
            writer.submit(record(next))
            next += 1
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(!FileManager.default.fileExists(atPath: orphan.path), "the orphan is still there")
        #expect(FileManager.default.fileExists(atPath: inFlight.path), "an open exchange's body file was swept")
        writer.finish()
        await running.value
    }

    /// A pin is decided on the event loop (a refused handshake); the store
    /// may be locked by another writer (a web front's "clear") for seconds.
    /// The loop hands the pin over and goes on; the writer stores it once
    /// the lock is gone, and the tunnel's view keeps it meanwhile.
    @Test func aPinIsHandedOffTheEventLoopWhileTheStoreIsLocked() async throws {
        let (writer, _, dir) = try writer()
        defer { try? FileManager.default.removeItem(at: dir) }
        let other = try CaptureDatabase(paths: GroupPaths(root: dir))
        let locked = DispatchSemaphore(value: 0)
        let released = Atomic<Bool>(false)
        DispatchQueue.global().async {
            try? other.pool.write { db in
                try db.execute(sql: "DELETE FROM pinned_domains")
                locked.signal()
                usleep(2_000_000)
            }
            released.store(true, ordering: .relaxed)
        }
        locked.wait()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let took = try await loop.submit { () -> Duration in
            let clock = ContinuousClock()
            let started = clock.now
            writer.recordPin("pinned.example", reason: "unknown_ca")
            return clock.now - started
        }.get()
        #expect(took < .milliseconds(500), "the event loop waited \(took) for the locked store")
        #expect(writer.pinnedHosts()["pinned.example"] != nil, "a pin waiting for the store is forgotten by a reload")
        while !released.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(20)) }
        await writer.flush()
        let stored = try PinnedDomainRepository(database: other).all()
        #expect(stored.map(\.host) == ["pinned.example"] && stored.first?.reason == "unknown_ca")
    }

    /// A breakpoint holds a message on the event loop; its row goes to the
    /// store through the capture sink. With the store locked by another
    /// writer, the loop goes on at once; the row is there once the lock is
    /// gone, and the message's outcome (its client left) joins it.
    @Test func aHeldMessageIsRecordedThroughTheSinkOffTheEventLoopWhileTheStoreIsLocked() async throws {
        let dir = URL(fileURLWithPath: "/tmp/bmw-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = StoreHandle(try CaptureDatabase(paths: GroupPaths(root: dir)))
        let writer = CaptureWriter(store: store, notifier: nil)
        let breakpoints = BreakpointController(store: store, records: writer, notifier: nil, groupPath: dir.path)
        breakpoints.apply(try AppSettings.decode(#"{"breakpoints": {"request": ["example.com/held"], "timeout_seconds": 0}}"#).settings)
        #expect(
            breakpoints.holds(.request, "http://example.com/held", exchange: nil), "with a store and a sink, a matching request is held")

        let other = try CaptureDatabase(paths: GroupPaths(root: dir))
        let locked = DispatchSemaphore(value: 0)
        let released = Atomic<Bool>(false)
        DispatchQueue.global().async {
            try? other.pool.write { db in
                try db.execute(sql: "DELETE FROM breakpoint_events")
                locked.signal()
                usleep(2_000_000)
            }
            released.store(true, ordering: .relaxed)
        }
        locked.wait()
        let message = try RawHTTPMessage.parse(Array("GET /held HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8), as: .request)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let (took, resolution) = try await loop.submit { () -> (Duration, EventLoopFuture<BreakpointResolution>) in
            let clock = ContinuousClock()
            let started = clock.now
            let resolution = breakpoints.pause(
                message, bodyless: false, kind: .request, requestID: "held-1", method: "GET",
                url: "http://example.com/held", on: loop)
            return (clock.now - started, resolution)
        }.get()
        #expect(took < .milliseconds(500), "the event loop waited \(took) for the locked store")
        while !released.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(20)) }

        let repository = BreakpointRepository(database: other)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(5)
        while breakpoints.heldCount == 0 && clock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let held = try repository.held()
        #expect(held.map(\.requestID) == ["held-1"] && held.first?.url == "http://example.com/held", "\(held)")

        breakpoints.clientLeft(requestID: "held-1")
        guard case .dropped = try await resolution.get() else {
            Issue.record("a held request whose client left goes nowhere")
            return
        }
        let events = try repository.events(requestID: "held-1")
        #expect(events.first?.outcome == .clientClosed, "the outcome is on the row before the message is let go: \(events)")
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
            try db.execute(
                sql: "CREATE TRIGGER refuse BEFORE INSERT ON exchanges BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
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

    /// One client's flood of DNS queries: past its rate it is answered
    /// REFUSED and nothing is recorded; what is recorded is trimmed within
    /// `capture.max_dns_rows`, and the exchanges stay.
    @Test func aDNSFloodIsRateLimitedAndNeverEvictsExchanges() async throws {
        let (writer, traffic, dir) = try writer()
        defer { try? FileManager.default.removeItem(at: dir) }
        var settings = AppSettings()
        settings.maxExchanges = 100
        settings.maxDNSRows = 150
        writer.apply(settings)
        for i in 0..<20 { writer.submit(record(i)) }
        await writer.flush()
        // No DNS server: each query forwarded is answered SERVFAIL at once, and recorded.
        let empty = dir.appendingPathComponent("resolv.conf")
        try Data().write(to: empty)
        let forwarder = DNSForwarder(
            group: MultiThreadedEventLoopGroup.singleton, capture: writer, devices: DeviceRegistry(), names: DNSNames())
        forwarder.apply(settings, resolvConf: empty.path)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let rcodes = Mutex<[String: [UInt8]]>([:])
        func ask(_ client: String, _ i: Int) throws {
            var query: [UInt8] = [UInt8(truncatingIfNeeded: i >> 8), UInt8(truncatingIfNeeded: i), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
            for label in ["q\(i)", "example", "com"] {
                query.append(UInt8(label.utf8.count))
                query.append(contentsOf: Array(label.utf8))
            }
            query.append(contentsOf: [0, 0, 1, 0, 1])
            forwarder.forward(
                ByteBuffer(bytes: query), from: try SocketAddress(ipAddress: client, port: 40_000), transport: "tcp", on: loop
            ) { answer in
                let rcode = answer.getInteger(at: 3, as: UInt8.self).map { $0 & 0x0F } ?? 0xFF
                rcodes.withLock { $0[client, default: []].append(rcode) }
            }
        }
        let started = DeviceRegistry.monotonic()
        for i in 0..<3_000 { try ask("10.0.0.9", i) }
        let elapsed = DeviceRegistry.monotonic() - started
        try ask("10.0.0.10", 1)
        await writer.flush()
        let flood = rcodes.withLock { $0["10.0.0.9"] ?? [] }
        #expect(flood.count == 3_000)
        let forwarded = flood.filter { $0 == 2 }.count
        #expect(forwarded >= 200 && Double(forwarded) <= 201 + 100 * elapsed, "\(forwarded) in \(elapsed) s")
        #expect(flood.filter { $0 == 5 }.count == 3_000 - forwarded)
        #expect(forwarder.refusedQueries == 3_000 - forwarded)
        // Another client is served as before.
        #expect(rcodes.withLock { $0["10.0.0.10"] } == [2])
        var all = TrafficRepository.Filter()
        all.limit = 10_000
        let rows = try traffic.list(all)
        #expect(rows.filter { !$0.isDNS }.count == 20)
        #expect(rows.filter(\.isDNS).count == 150)
    }
}
