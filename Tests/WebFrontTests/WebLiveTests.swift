import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import HummingbirdWSTesting
import HummingbirdWebSocket
import NIOCore
import Testing

@testable import WebFront

/// `/api/live` over a real socket: the page's filter decides which newly
/// stored rows it is sent; a bad filter is answered with its position; no
/// cookie, no upgrade.
// A live-socket wait that never ends fails by name instead of holding CI to its limit.
@Suite(.timeLimit(.minutes(2))) struct WebLiveTests {
    func application(_ fixture: WebFixture) -> some ApplicationProtocol {
        let router = fixture.app.router()
        return Application(
            router: router, server: .http1WebSocketUpgrade(webSocketRouter: router),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    static func object(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    @Test func rowsStoredAfterTheFilterArriveAndOnlyThoseItKeeps() async throws {
        let fixture = try WebFixture()
        try fixture.insert(5)
        try await application(fixture).test(.live) { client in
            let headers: HTTPFields = [.cookie: fixture.cookie, .secFetchSite: "same-origin"]
            try await client.ws("/api/live", configuration: .init(additionalHeaders: headers)) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                func next(_ type: String) async throws -> [String: Any] {
                    while let message = try await messages.next() {
                        guard case let .text(text) = message else { continue }
                        let object = Self.object(text)
                        if object["type"] as? String == type { return object }
                    }
                    throw CancellationError()
                }
                let hello = try await next("hello")
                #expect(hello["last_id"] as? Int == 5)
                // A bad filter: refused with its position, and the old one stays.
                try await outbound.write(.text(#"{"type":"filter","filter":"~c 200 & ~bogus"}"#))
                let error = try await next("error")
                #expect(error["position"] as? Int == 10)
                // A misspelled key is named, not ignored.
                try await outbound.write(.text(#"{"type":"filter","filtr":"~c 200"}"#))
                #expect((try await next("error")["error"] as? String)?.contains(#""filtr""#) == true)
                try await outbound.write(.text(#"{"type":"filter","filter":"~d wanted.example","after":5}"#))
                // Messages are taken in order: the answer to a wrong one says the filter has landed (no sleep to race a loaded machine).
                try await outbound.write(.text(#"{"type":"nonsense"}"#))
                _ = try await next("error")
                try fixture.insert(3, from: 5, host: "other.example")
                try fixture.insert(2, from: 8, host: "wanted.example")
                await fixture.app.feed.notified(.newTrafficCaptured)
                let added = try await next("added")
                let rows = try #require(added["exchanges"] as? [[String: Any]])
                #expect(rows.compactMap { $0["id"] as? Int } == [9, 10])
                #expect(rows.allSatisfy { $0["host"] as? String == "wanted.example" })
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }

    /// Issue 22: open-exchanges.json lags the store; an exchange already
    /// stored is not sent as in flight beside its row.
    @Test func anExchangeAlreadyStoredIsNotSentAsInFlight() async throws {
        let fixture = try WebFixture()
        let stored = try fixture.insert(1)[0]
        let entries = [stored.requestID, "still-open"].map {
            OpenExchangesFile.Entry(requestID: $0, startedAt: fixture.base, method: "GET", url: "https://api.example.com/x", client: nil)
        }
        try OpenExchangesFile(pid: getpid(), count: 2, entries: entries).encoded().write(to: fixture.paths.openExchanges)
        try await application(fixture).test(.live) { client in
            let headers: HTTPFields = [.cookie: fixture.cookie, .secFetchSite: "same-origin"]
            try await client.ws("/api/live", configuration: .init(additionalHeaders: headers)) { inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                _ = try await messages.next()
                await fixture.app.feed.notified(.openExchangesChanged)
                while let message = try await messages.next() {
                    guard case let .text(text) = message, Self.object(text)["type"] as? String == "open" else { continue }
                    let open = (Self.object(text)["entries"] as? [[String: Any]] ?? []).compactMap { $0["request_id"] as? String }
                    // The first may be the empty set from before the file was read.
                    if open.isEmpty { continue }
                    #expect(open == ["still-open"])
                    break
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
        }
    }

    @Test func noCookieNoUpgrade() async throws {
        let fixture = try WebFixture()
        _ = try await application(fixture).test(.live) { client in
            await #expect(throws: (any Error).self) {
                try await client.ws("/api/live") { _, _, _ in Issue.record("upgraded without the cookie") }
            }
        }
    }

    /// The cookie goes along from any page of the same host (another
    /// port is the same site): only the page's own may open the feed.
    @Test func anotherPagesSocketIsRefusedEvenWithTheCookie() async throws {
        let fixture = try WebFixture()
        try await application(fixture).test(.live) { client in
            for headers: HTTPFields in [
                [.cookie: fixture.cookie, .secFetchSite: "same-site"], [.cookie: fixture.cookie, .origin: "http://127.0.0.1:1"],
                [.cookie: fixture.cookie],
            ] {
                await #expect(throws: (any Error).self) {
                    try await client.ws("/api/live", configuration: .init(additionalHeaders: headers)) { _, _, _ in
                        Issue.record("upgraded from another page")
                    }
                }
            }
        }
    }
}
