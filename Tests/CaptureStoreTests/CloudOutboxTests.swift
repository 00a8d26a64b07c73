import BusymateShared
import Foundation
import Testing

@testable import CaptureStore

@Suite struct CloudOutboxTests {
    final class Store {
        let dir: URL
        let database: CaptureDatabase
        init() throws {
            dir = URL(fileURLWithPath: "/tmp/bmo-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            database = try CaptureDatabase(paths: GroupPaths(root: dir))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }
        var traffic: TrafficRepository { TrafficRepository(database: database) }
        var outbox: CloudOutbox { CloudOutbox(database: database, sink: "postgrest") }

        func add(_ count: Int, from start: Int = 0) throws {
            _ = try traffic.insert(
                (start..<(start + count)).map { i in
                    ExchangeRecord(
                        startedAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)), scheme: "http", method: "GET",
                        host: "h\(i).example", port: 80, path: "/", url: "http://h\(i).example/", tlsMode: .none)
                })
        }
    }

    @Test func aNewAccountStartsAtThePairingAndTheSameAccountResumes() async throws {
        let store = try Store()
        try store.add(5)
        // Paired after the fifth row started (they start a second apart).
        let first = try await store.outbox.open(account: "api.example/owner-1", since: Date(timeIntervalSince1970: 1_800_000_004.5))
        #expect(first.sentID == 5)
        #expect(try await store.outbox.rows(after: first.sentID, limit: 10).isEmpty)
        try store.add(3, from: 5)
        let rows = try await store.outbox.rows(after: first.sentID, limit: 10)
        #expect(rows.map(\.id) == [6, 7, 8])
        try await store.outbox.advance(through: 7, sent: 2)
        // Re-paired to the same account: where the last token stopped.
        let again = try await store.outbox.open(account: "api.example/owner-1", since: .distantFuture)
        #expect(again.sentID == 7 && again.sentRows == 2)
        #expect(try await store.outbox.backlog(after: again.sentID).rows == 1)
        // Another account: nothing captured before it goes to it.
        let other = try await store.outbox.open(account: "api.example/owner-2", since: .distantFuture)
        #expect(other.sentID == 8 && other.sentRows == 0)
        // Read late: rows that started after the pairing are still its.
        let late = try await store.outbox.open(account: "api.example/owner-3", since: Date(timeIntervalSince1970: 1_800_000_006.5))
        #expect(late.sentID == 7)
    }

    @Test func theCursorNeverMovesBack() async throws {
        let store = try Store()
        try store.add(4)
        _ = try await store.outbox.open(account: "a", since: .distantFuture)
        try await store.outbox.advance(through: 9, sent: 1)
        try await store.outbox.advance(through: 6, sent: 1)
        #expect(try await store.outbox.cursor()?.sentID == 9)
    }

    @Test func retentionCountsTheRowsItRemovesBeforeTheyWereSent() async throws {
        let store = try Store()
        _ = try await store.outbox.open(account: "a", since: .distantFuture)
        try store.add(30)
        try await store.outbox.advance(through: 10, sent: 10)
        // Keep 5: rows 1–25 go, of which 11–25 were never sent.
        _ = try await store.traffic.prune(.init(maxExchanges: 5, maxBytes: .max))
        #expect(try await store.outbox.cursor()?.droppedUnsent == 15)
        // "Clear" counts the rest.
        _ = try store.traffic.clear()
        #expect(try await store.outbox.cursor()?.droppedUnsent == 20)
    }

    @Test func noRowIsCountedWhenEverythingWasSent() async throws {
        let store = try Store()
        _ = try await store.outbox.open(account: "a", since: .distantFuture)
        try store.add(30)
        try await store.outbox.advance(through: 30, sent: 30)
        _ = try await store.traffic.prune(.init(maxExchanges: 5, maxBytes: .max))
        #expect(try await store.outbox.cursor()?.droppedUnsent == 0)
    }
}
