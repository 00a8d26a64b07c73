import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging

/// `/api/live`: one WebSocket per open page. The page says which filter it
/// shows; the connection sends the rows that filter keeps as they are
/// stored, and the shared state (in flight, held, status) as it changes.
struct LiveRoutes<Context: WebSocketRequestContext & RequestContext> {
    let reader: CaptureReader
    let feed: LiveFeed

    /// Rows per `added` message; a burst goes as several.
    static var batch: Int { 200 }

    func register(on router: Router<Context>) {
        router.ws("/api/live") { inbound, outbound, _ in
            let (id, signals) = await feed.subscribe()
            let connection = LiveConnection()
            let start = (try? await reader.read { try $0.traffic.lastID() }) ?? 0
            await connection.reset(filter: TrafficRepository.Filter(), after: start)
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    // The page's messages: its filter.
                    do {
                        for try await message in inbound.messages(maxSize: 64 << 10) {
                            guard case let .text(text) = message else { continue }
                            if let error = await apply(text, to: connection) {
                                try? await outbound.write(.text(error))
                            }
                            await feed.poke(id)
                        }
                    } catch {}
                }
                group.addTask {
                    do {
                        try await outbound.write(
                            .text(
                                JSONWriter.compact(
                                    ExchangeJSON.object([
                                        ("type", ExchangeJSON.string("hello")),
                                        ("last_id", ExchangeJSON.number(start)),
                                    ]))))
                        try await outbound.write(.text(await feed.openMessage))
                        try await outbound.write(.text(await feed.heldMessage))
                        if let status = await feed.statusMessage { try await outbound.write(.text(status)) }
                        for await signal in signals {
                            switch signal {
                            case .traffic: try await sendAdded(connection, outbound)
                            case .open: try await outbound.write(.text(await feed.openMessage))
                            case .held: try await outbound.write(.text(await feed.heldMessage))
                            case .status: if let status = await feed.statusMessage { try await outbound.write(.text(status)) }
                            case .cleared: try await outbound.write(.text(#"{"type":"cleared"}"#))
                            case .messages: try await outbound.write(.text(await feed.messagesMessage))
                            }
                        }
                    } catch {}
                }
                // Either side ending ends the connection.
                await group.next()
                group.cancelAll()
            }
            await feed.unsubscribe(id)
        }
    }

    /// `{"type":"filter","filter":"…","after":ID}`; an error message to send back, or nil.
    func apply(_ text: String, to connection: LiveConnection) async -> String? {
        guard let node = try? JSONParser.parse(text), case let .string(type)? = node["type"]?.value, type == "filter" else {
            return #"{"type":"error","error":"expected {\"type\":\"filter\",\"filter\":\"…\"}"}"#
        }
        // A misspelled key would leave the list unfiltered without a word.
        if case let .object(members) = node.value,
            let unknown = members.first(where: { !["type", "filter", "after"].contains($0.key) })?.key
        {
            return JSONWriter.compact(
                ExchangeJSON.object([
                    ("type", ExchangeJSON.string("error")),
                    ("error", ExchangeJSON.string("unknown key \"\(unknown)\" (a filter message takes type, filter, after)")),
                ]))
        }
        var filter = TrafficRepository.Filter()
        filter.limit = Self.batch
        if case let .string(source)? = node["filter"]?.value, !source.trimmingCharacters(in: .whitespaces).isEmpty {
            do {
                filter.expression = try CaptureFilter.parse(source)
            } catch {
                return JSONWriter.compact(
                    ExchangeJSON.object([
                        ("type", ExchangeJSON.string("error")), ("error", ExchangeJSON.string(error.message)),
                        ("position", ExchangeJSON.number(error.position)),
                    ]))
            }
        }
        var after: Int64?
        if case let .number(text)? = node["after"]?.value { after = Int64(text) }
        if after == nil {
            do {
                after = try await reader.read { try $0.traffic.lastID() }
            } catch is CaptureReader.Unavailable {
                after = 0  // no store yet: every row to come is new
            } catch {
                // Unread now: the mark stays where it was (0 would send the whole store).
            }
        }
        await connection.reset(filter: filter, after: after)
        return nil
    }

    /// Everything stored since the connection's mark that its filter keeps.
    func sendAdded(_ connection: LiveConnection, _ outbound: WebSocketOutboundWriter) async throws {
        while true {
            let (filter, last, generation) = await connection.current()
            // A body search or a regular expression takes the slow lane here too: cheap reads keep theirs.
            let (rows, next, full) = try await reader.read(lane: QueryLane.of(filter.expression)) { repos in
                let (records, newest) = try repos.traffic.stored(after: last, filter)
                let full = records.count == filter.limit
                return (try WebRows.rows(records, repos), full ? records.last?.id ?? newest : newest, full)
            }
            // The filter changed meanwhile: these rows were for the old one.
            guard await connection.advance(to: next, generation: generation) else { continue }
            if !rows.isEmpty {
                try await outbound.write(
                    .text(
                        JSONWriter.compact(
                            ExchangeJSON.object([
                                ("type", ExchangeJSON.string("added")),
                                ("exchanges", ExchangeJSON.array(rows)),
                            ]))))
            }
            if !full { return }
        }
    }
}

/// One page's filter and how far it has been sent.
actor LiveConnection {
    private var filter = TrafficRepository.Filter()
    private var last: Int64 = 0
    private var generation = 0

    func reset(filter: TrafficRepository.Filter, after: Int64?) {
        var filter = filter
        filter.limit = LiveRoutes<BasicWebSocketRequestContext>.batch
        self.filter = filter
        if let after { last = after }
        generation += 1
    }

    func current() -> (TrafficRepository.Filter, Int64, Int) { (filter, last, generation) }

    func advance(to id: Int64, generation: Int) -> Bool {
        guard generation == self.generation else { return false }
        last = max(last, id)
        return true
    }
}
