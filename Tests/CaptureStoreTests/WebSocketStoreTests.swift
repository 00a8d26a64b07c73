import BusymateShared
import Foundation
import GRDB
import Testing

@testable import CaptureStore

/// A socket's events as the tunnel's writer commits them: the handshake's
/// row, then its messages (counted on the socket, their bytes on the row),
/// then its close; retention and "clear" take the messages with the row;
/// filters search the messages by direction.
@Suite struct WebSocketStoreTests {
    final class Store {
        let dir: URL
        let database: CaptureDatabase
        init() throws {
            dir = URL(fileURLWithPath: "/tmp/bmws-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            database = try CaptureDatabase(paths: GroupPaths(root: dir))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }
        var traffic: TrafficRepository { TrafficRepository(database: database) }
        var sockets: WebSocketRepository { WebSocketRepository(database: database) }
        let unlimited = TrafficRepository.Retention(maxExchanges: 1_000_000, maxBytes: 1 << 40)

        @discardableResult
        func save(_ records: [ExchangeRecord], _ events: [WebSocketEvent], keeping retention: TrafficRepository.Retention? = nil)
            async throws -> TrafficRepository.Trimmed
        {
            try await traffic.save(records, sockets: events, keeping: retention ?? unlimited, size: nil)
        }
    }

    private func handshake(_ path: String) -> ExchangeRecord {
        var r = ExchangeRecord(
            scheme: "http", method: "GET", host: "chat.example", port: 80, path: path, url: "http://chat.example\(path)", tlsMode: .none)
        r.status = 101
        return r
    }

    private func message(_ id: String, _ seq: Int, _ text: String, fromClient: Bool) -> WebSocketMessageRecord {
        WebSocketMessageRecord(
            requestID: id, seq: seq, at: Date(), fromClient: fromClient, opcode: .text, length: text.utf8.count,
            wireLength: text.utf8.count, payload: Data(text.utf8), stored: text.utf8.count)
    }

    @Test func aSocketIsOpenWithItsMessagesCountedThenClosed() async throws {
        let store = try Store()
        let row = handshake("/chat")
        let id = row.requestID
        try await store.save(
            [row],
            [
                .opened(.init(requestID: id, at: Date(), tunnelPID: 42, extensions: "permessage-deflate")),
                .messages([message(id, 1, "hello", fromClient: true), message(id, 2, "hi there", fromClient: false)]),
            ])
        let stored = try #require(try store.traffic.find(requestID: id))
        #expect(stored.endedAt == nil && stored.storedBytes == 13)
        var socket = try #require(try store.sockets.socket(exchangeID: stored.id ?? 0))
        #expect(socket.isOpen && socket.messagesUp == 1 && socket.messagesDown == 1 && socket.extensions == "permessage-deflate")
        try await store.save(
            [],
            [
                .messages([message(id, 3, "more", fromClient: true)]),
                .closed(
                    .init(
                        requestID: id, at: Date(), pings: 2, pongs: 2, closeCode: 1000, closeReason: "bye", closedBy: "client",
                        bytesUp: 30, bytesDown: 20, error: nil)),
            ])
        socket = try #require(try store.sockets.socket(exchangeID: stored.id ?? 0))
        #expect(
            !socket.isOpen && socket.messagesUp == 2 && socket.closeCode == 1000 && socket.closeReason == "bye"
                && socket.closedBy == "client")
        let ended = try #require(try store.traffic.find(requestID: id))
        #expect(ended.endedAt != nil && ended.bytesUp == 30 && ended.bytesDown == 20 && ended.storedBytes == 17)
        let messages = try store.sockets.messages(of: ended)
        #expect(messages.map(\.seq) == [1, 2, 3] && messages.map(\.fromClient) == [true, false, true])
        #expect(
            try messages.map { String(decoding: try store.sockets.payload($0) ?? Data(), as: UTF8.self) } == ["hello", "hi there", "more"])
        #expect(try store.sockets.stored(after: messages[0].id ?? 0).map(\.message.seq) == [2, 3])
    }

    @Test func eventsOfASocketWhoseRowIsGoneAreSkipped() async throws {
        let store = try Store()
        try await store.save(
            [],
            [
                .opened(.init(requestID: "gone", at: Date(), tunnelPID: 1, extensions: nil)),
                .messages([message("gone", 1, "x", fromClient: true)]),
            ])
        #expect(try store.sockets.lastMessageID() == 0)
    }

    @Test func retentionAndClearTakeTheMessagesWithTheRow() async throws {
        let store = try Store()
        let first = handshake("/one"), second = handshake("/two")
        try await store.save(
            [first, second],
            [
                .opened(.init(requestID: first.requestID, at: Date(), tunnelPID: 1, extensions: nil)),
                .opened(.init(requestID: second.requestID, at: Date(), tunnelPID: 1, extensions: nil)),
                .messages([message(first.requestID, 1, "old", fromClient: true), message(second.requestID, 1, "new", fromClient: true)]),
                .closed(
                    .init(
                        requestID: first.requestID, at: Date(), pings: 0, pongs: 0, closeCode: nil, closeReason: nil,
                        closedBy: nil, bytesUp: 0, bytesDown: 0, error: nil)),
            ])
        let trimmed = try await store.save([], [], keeping: .init(maxExchanges: 1, maxBytes: 1 << 40))
        #expect(trimmed.removed == 1 && trimmed.files == ["\(first.requestID).messages"], "a closed socket's file goes with it")
        let count = try await store.database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM ws_messages") }
        #expect(count == 1)
        _ = try store.traffic.clear()
        let left = try await store.database.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM ws_messages) + (SELECT count(*) FROM websockets)")
        }
        #expect(left == 0)
    }

    @Test func socketsATunnelThatIsGoneLeftOpenAreClosed() async throws {
        let store = try Store()
        let mine = handshake("/mine"), theirs = handshake("/theirs")
        try await store.save(
            [mine, theirs],
            [
                .opened(.init(requestID: mine.requestID, at: Date(), tunnelPID: 7, extensions: nil)),
                .opened(.init(requestID: theirs.requestID, at: Date(), tunnelPID: 8, extensions: nil)),
            ])
        #expect(try await store.sockets.closeAbandoned { $0 == 7 } == 1)
        let row = try #require(try store.traffic.find(requestID: theirs.requestID))
        #expect(row.endedAt != nil && row.error?.contains("stopped before it closed") == true)
        #expect(try store.sockets.openSockets().map(\.exchange.requestID) == [mine.requestID])
    }

    @Test func filtersSearchMessagesByDirection() async throws {
        let store = try Store()
        let row = handshake("/ticker")
        try await store.save(
            [row, handshake("/plain-get")],
            [
                .opened(.init(requestID: row.requestID, at: Date(), tunnelPID: 1, extensions: nil)),
                .messages([
                    message(row.requestID, 1, "subscribe AAPL", fromClient: true),
                    message(row.requestID, 2, "price 189.5", fromClient: false),
                ]),
            ])
        func urls(_ text: String) throws -> [String] {
            var filter = TrafficRepository.Filter()
            filter.expression = try CaptureFilter.parse(text)
            return try store.traffic.list(filter).map(\.url)
        }
        #expect(try urls("~bq subscribe") == ["http://chat.example/ticker"])
        #expect(try urls("~bs subscribe") == [])
        #expect(try urls("~bs 'price 18'") == ["http://chat.example/ticker"])
        #expect(try urls("~b AAPL") == ["http://chat.example/ticker"])
        #expect(try urls("~websocket") == ["http://chat.example/ticker"])
        // A side's two terms stay together under `!` and `&`.
        #expect(try urls("!~bq subscribe") == ["http://chat.example/plain-get"])
        #expect(try urls("~u plain-get & ~bq subscribe") == [])
        #expect(try urls("~u ticker & !~bs price") == [])
    }

    /// Exported as Chrome DevTools writes them, and read back from such a file.
    @Test func harCarriesTheMessagesBothWays() async throws {
        let store = try Store()
        var row = handshake("/har")
        row.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "websocket"), ("Sec-WebSocket-Extensions", "permessage-deflate")])
        var binary = message(row.requestID, 2, "", fromClient: false)
        (binary.opcode, binary.payload, binary.length, binary.stored) = (.binary, Data([0, 1, 0xFF]), 3, 3)
        try await store.save(
            [row],
            [
                .opened(.init(requestID: row.requestID, at: Date(), tunnelPID: 1, extensions: nil)),
                .messages([message(row.requestID, 1, "ping?", fromClient: true), binary]),
            ])
        let stored = try #require(try store.traffic.find(requestID: row.requestID))
        let entry = HAR.entry(stored, bodies: BodyStore(paths: store.database.paths), sockets: store.sockets)
        let listed = try #require(entry["_webSocketMessages"] as? [[String: Any]])
        #expect(listed.map { $0["type"] as? String } == ["send", "receive"] && listed.map { $0["opcode"] as? Int } == [1, 2])
        #expect(listed.map { $0["data"] as? String } == ["ping?", "AAH/"] && entry["_resourceType"] as? String == "websocket")
        // Read back: a new row with its socket and the same messages.
        let json = try JSONSerialization.data(withJSONObject: entry)
        let (record, events) = try HARImport.entry(json, 0..<json.count, number: 1, name: "chrome.har")
        _ = try store.traffic.insert([record], sockets: events)
        let imported = try #require(try store.traffic.find(requestID: record.requestID))
        let back = try store.sockets.messages(of: imported)
        #expect(back.map(\.fromClient) == [true, false] && back.map(\.opcode) == [.text, .binary])
        #expect(back.map(\.payload) == [Data("ping?".utf8), Data([0, 1, 0xFF])])
        let socket = try #require(try store.sockets.socket(exchangeID: imported.id ?? 0))
        #expect(!socket.isOpen && socket.extensions == "permessage-deflate" && socket.messagesUp == 1 && socket.messagesDown == 1)
    }
}
