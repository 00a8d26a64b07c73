import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/api/exchanges…`: the list by keyset pages, one exchange, its bodies.
struct ExchangeRoutes<Context: RequestContext> {
    let reader: CaptureReader
    /// Descriptor sets parsed once while their files are unchanged.
    let descriptorSets = DescriptorSets.Cache()

    static var maxPage: Int { 500 }
    /// A body's text in the detail answer; past it, the page fetches the bytes.
    static var textLimit: Int { 1 << 20 }

    func register(on router: Router<Context>) {
        router.get("/api/exchanges") { request, _ in try await list(request) }
        router.get("/api/exchanges/:id") { _, context in try await detail(context) }
        router.get("/api/exchanges/:id/:side/body") { request, context in try await body(request, context) }
        router.get("/api/exchanges/:id/hex") { request, context in try await hex(request, context) }
        router.get("/api/exchanges/:id/raw") { request, context in try await raw(request, context) }
        router.get("/api/exchanges/:id/messages") { request, context in try await messages(request, context) }
        router.post("/api/exchanges/:id/messages") { request, context in try await send(request, context) }
    }

    /// The filter of `filter=`, or the answer refusing it.
    static func filter(_ query: QueryItems, limit: Int) -> Result<TrafficRepository.Filter, FilterFailure> {
        var filter = TrafficRepository.Filter()
        filter.limit = limit
        if let text = query["filter"], !text.trimmingCharacters(in: .whitespaces).isEmpty {
            do {
                filter.expression = try CaptureFilter.parse(text)
            } catch {
                return .failure(FilterFailure(error: error))
            }
        }
        return .success(filter)
    }

    struct FilterFailure: Error {
        var error: FilterError
        var response: Response {
            WebJSON.error(.badRequest, error.message, [("position", ExchangeJSON.number(error.position))])
        }
    }

    func list(_ request: Request) async throws -> Response {
        let query = QueryItems(request.uri.query)
        let limit = max(1, min(Self.maxPage, query.int("limit") ?? 100))
        var filter: TrafficRepository.Filter
        switch Self.filter(query, limit: limit) {
        case let .success(f): filter = f
        case let .failure(failure): return failure.response
        }
        if let before = query["before"] {
            guard let id = Int64(before) else { return WebJSON.error(.badRequest, "before= takes an exchange id") }
            filter.before = id
        }
        let page = filter
        do {
            let (rows, last) = try await reader.read(lane: QueryLane.of(page.expression)) { repos in
                let records = try repos.traffic.list(page)
                return (try WebRows.rows(records, repos), records.count == limit ? records.last?.id : nil)
            }
            let next = ExchangeJSON.number(last)
            return WebJSON.response(ExchangeJSON.object([("exchanges", ExchangeJSON.array(rows)), ("next", next)]))
        } catch let error as CaptureReader.Unavailable {
            // No store yet is an empty capture, said so.
            return WebJSON.response(
                ExchangeJSON.object([
                    ("exchanges", ExchangeJSON.array([])), ("next", JSONNode(.null)),
                    ("store", ExchangeJSON.string(error.description)),
                ]))
        }
    }

    func detail(_ context: Context) async throws -> Response {
        guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not an exchange id") }
        let found = try await reader.read { repos -> JSONNode? in
            guard let record = try repos.traffic.find(id: id) else { return nil }
            let resentFrom = try record.resentFrom.flatMap { try repos.traffic.find(requestID: $0)?.id }
            let bodies: [BodyStore.Direction: ExchangeBody] = [
                .request: try ExchangeBody(record, .request, bodies: repos.bodies, raw: false),
                .response: try ExchangeBody(record, .response, bodies: repos.bodies, raw: false),
            ]
            let events = try repos.breakpoints.events(requestID: record.requestID)
            // On the thread pool, as the store is: the files are read here.
            let schema = GRPCExchange.isGRPC(record) ? DescriptorSets.named(in: reader.paths, cache: descriptorSets) : nil
            let held = events.contains { $0.resumedAt == nil && $0.outcome == nil }
            var members = ExchangeJSON.detailMembers(record, resentFrom: resentFrom, bodies: bodies, breakpoints: events, schema: schema) {
                body in
                WebRows.body(body, id: id, textLimit: Self.textLimit)
            }
            members.insert(("held", ExchangeJSON.bool(held)), at: WebRows.heldIndex)
            members.append(("curl", ExchangeJSON.string(WebRows.curl(record, body: bodies[.request]))))
            if let socket = try repos.sockets.socket(exchangeID: id) { members.append(("websocket", WebSocketJSON.socket(socket))) }
            return ExchangeJSON.object(members)
        }
        guard let found else { return WebJSON.error(.notFound, "no exchange \(id) (it may have been removed by retention)") }
        return WebJSON.response(found)
    }

    enum Side: String { case request, response }

    /// The bytes of one body: decoded unless `raw=1`. Never served as its
    /// own type (a captured page must not run here), except an image asked
    /// for as a preview, in a sandbox.
    func body(_ request: Request, _ context: Context) async throws -> Response {
        guard let id = context.parameters.get("id", as: Int64.self), let side = context.parameters.get("side").flatMap(Side.init) else {
            return WebJSON.error(.badRequest, "expected /api/exchanges/ID/request/body or …/response/body")
        }
        let query = QueryItems(request.uri.query)
        let raw = query.flag("raw")
        let direction: BodyStore.Direction = side == .request ? .request : .response
        let found = try await reader.read { repos -> ExchangeBody? in
            guard let record = try repos.traffic.find(id: id) else { return nil }
            return try ExchangeBody(record, direction, bodies: repos.bodies, raw: raw)
        }
        guard let body = found else { return WebJSON.error(.notFound, "no exchange \(id)") }
        let bytes = body.shown ?? Data()
        var headers: HTTPFields = [.contentType: "application/octet-stream"]
        if query.flag("preview") {
            guard let type = WebRows.previewType(body.contentType) else {
                return WebJSON.error(.unsupportedMediaType, "only png, jpeg, gif, webp, bmp and ico bodies are previewed")
            }
            headers[.contentType] = type
            headers[.contentSecurityPolicy] = "sandbox; default-src 'none'"
        }
        if query.flag("download") {
            let name = "busymate-\(id).\(side.rawValue)\(raw ? ".raw" : "")\(WebRows.fileExtension(body.contentType))"
            headers[.contentDisposition] = "attachment; filename=\"\(name)\""
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// `xxd` lines of a window of a body (the page pages binary bodies).
    func hex(_ request: Request, _ context: Context) async throws -> Response {
        let query = QueryItems(request.uri.query)
        guard let id = context.parameters.get("id", as: Int64.self), let side = Side(rawValue: query["side"] ?? "response") else {
            return WebJSON.error(.badRequest, "expected /api/exchanges/ID/hex?side=request|response")
        }
        let offset = max(0, query.int("offset") ?? 0) & ~15
        let length = max(16, min(64 << 10, query.int("length") ?? 4096))
        let raw = query.flag("raw")
        let found: (data: Data, total: Int)?
        do {
            found = try await reader.read { repos -> (data: Data, total: Int)? in
                guard let record = try repos.traffic.find(id: id) else { return nil }
                return try ExchangeBody.window(
                    of: record, side == .request ? .request : .response, bodies: repos.bodies, raw: raw, offset: offset,
                    length: length)
            }
        } catch let error as BodyStoreError {
            // The row names a body file that is gone, or is no plain file (a link planted in bodies/).
            return WebJSON.error(.internalServerError, error.description)
        }
        guard let (window, total) = found else { return WebJSON.error(.notFound, "no exchange \(id)") }
        let lines = HexDump.lines(window).map { line in
            // Offsets are of the whole body, not of the window.
            String(offset + (Int(line.prefix(8), radix: 16) ?? 0), radix: 16).leftPadded(8) + line.dropFirst(8)
        }
        return WebJSON.response(
            ExchangeJSON.object([
                ("lines", ExchangeJSON.array(lines.map { ExchangeJSON.string($0) })),
                ("offset", ExchangeJSON.number(offset)), ("total", ExchangeJSON.number(total)),
            ]))
    }

    /// One side as an HTTP/1.1 message: its head, then the body decoded
    /// when it is text, or a note of its size when not.
    func raw(_ request: Request, _ context: Context) async throws -> Response {
        let query = QueryItems(request.uri.query)
        guard let id = context.parameters.get("id", as: Int64.self), let side = Side(rawValue: query["side"] ?? "request") else {
            return WebJSON.error(.badRequest, "expected /api/exchanges/ID/raw?side=request|response")
        }
        let found = try await reader.read { repos -> String? in
            guard let record = try repos.traffic.find(id: id) else { return nil }
            let direction: BodyStore.Direction = side == .request ? .request : .response
            return WebRows.rawMessage(record, direction, body: try ExchangeBody(record, direction, bodies: repos.bodies, raw: false))
        }
        guard let text = found else { return WebJSON.error(.notFound, "no exchange \(id)") }
        return WebJSON.text(text)
    }

    static var messagesPage: Int { 500 }
    /// A message's bytes in a page of messages; past it, `cut`.
    static var messageTextLimit: Int { 64 << 10 }

    /// `/api/exchanges/ID/messages?after=SEQ&limit=N`: a WebSocket's state
    /// and its messages after `after`, in order; `next` is the last one's
    /// number when more follow.
    func messages(_ request: Request, _ context: Context) async throws -> Response {
        guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not an exchange id") }
        let query = QueryItems(request.uri.query)
        let after = max(0, query.int("after") ?? 0)
        let limit = max(1, min(Self.messagesPage, query.int("limit") ?? Self.messagesPage))
        let found = try await reader.read { repos -> JSONNode? in
            guard let record = try repos.traffic.find(id: id), let socket = try repos.sockets.socket(exchangeID: id) else { return nil }
            let list = try repos.sockets.messages(of: record, afterSeq: after, limit: limit)
            // One byte past the limit says the payload was cut, without reading the rest.
            let nodes = list.map { m in
                WebSocketJSON.message(
                    m, payload: (try? repos.sockets.payload(m, limit: Self.messageTextLimit + 1)) ?? nil, shownLimit: Self.messageTextLimit)
            }
            return ExchangeJSON.object([
                ("websocket", WebSocketJSON.socket(socket)), ("messages", ExchangeJSON.array(nodes)),
                ("next", ExchangeJSON.number(list.count == limit ? list.last?.seq : nil)),
            ])
        }
        guard let found else { return WebJSON.error(.notFound, "exchange \(id) is no WebSocket, or is gone") }
        return WebJSON.response(found)
    }

    /// `POST /api/exchanges/ID/messages` `{"to": "client"|"server", "text": …}` or
    /// `{"to": …, "base64": …}`: a message of the user's own into the open
    /// socket (the composer); answers with its number once the tunnel sent it.
    func send(_ request: Request, _ context: Context) async throws -> Response {
        guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not an exchange id") }
        let usage = #"expected {"to": "client" or "server", "text": "…"} or {"to": …, "base64": "…"}"#
        guard let body = try await WebJSON.body(request), case let .string(to)? = body["to"]?.value, ["client", "server"].contains(to)
        else {
            return WebJSON.error(.badRequest, usage)
        }
        if let refused = WebJSON.unknownKey(body, allowed: ["to", "text", "base64"], in: "a message to send") { return refused }
        let payload: Data
        let opcode: WebSocketMessageRecord.Opcode
        switch (body["text"]?.value, body["base64"]?.value) {
        case let (.string(text)?, nil):
            (payload, opcode) = (Data(text.utf8), .text)
        case let (nil, .string(encoded)?):
            guard let bytes = Data(base64Encoded: encoded) else { return WebJSON.error(.badRequest, "base64 is not base64") }
            (payload, opcode) = (bytes, .binary)
        default:
            return WebJSON.error(.badRequest, usage)
        }
        let paths = reader.paths
        do {
            let send = try await reader.read(writing: true) { repos in
                try repos.sends.request(exchangeID: id, toClient: to == "client", opcode: opcode, payload: payload)
            }
            WebSocketSendRepository.announce(send, paths: paths, sender: "web")
            // Waited for between short reads: no pool thread sleeps.
            let asked = Date()
            while true {
                if let seq = try await reader.read(writing: true, { repos in try repos.sends.outcome(send, askedAt: asked) }) {
                    return WebJSON.ok([("seq", ExchangeJSON.number(seq))])
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch let refusal as WebSocketSendRepository.Refusal {
            return WebJSON.error(.conflict, refusal.description)
        }
    }
}
