import ArgumentParser
import BusymateShared
import CaptureStore
import Foundation

struct Show: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show exchanges: headers, timing, TLS and bodies.",
        discussion: """
            Bodies are shown decoded (gzip, deflate, br undone), JSON pretty-printed with its keys in their order and its numbers \
            as written, binary bodies as a hex dump; a gRPC call's messages as protobuf, by field name when a descriptor set in \
            grpc.descriptor_sets describes its method. Long output goes through $PAGER when stdout is a terminal.
            """)

    enum Side: String, ExpressibleByArgument, CaseIterable {
        case request, response
        var direction: BodyStore.Direction { self == .request ? .request : .response }
    }

    @OptionGroup var options: GroupOption
    @Argument(help: "Exchange ids (from `busymate list`), request ids, or the start of a request id.", completion: Completions.exchangeIDs)
    var ids: [String]
    @Flag(help: "Bodies as received: Content-Encoding not undone, no formatting.") var raw = false
    @Flag(help: "Print JSON (one object; an array for several exchanges).") var json = false
    @Flag(help: "Only the request and response lines and headers.") var headers = false
    @Option(help: "Only this body: request or response.") var body: Side?
    @Option(
        name: .customLong("save-body"), parsing: .upToNextOption,
        help: ArgumentHelp("Write a body to a file, decoded unless --raw: request|response FILE (- for stdout).", valueName: "side file"))
    var saveBody: [String] = []
    @Flag(help: "Never page.") var noPager = false
    @Flag(help: "A WebSocket's messages, in order (with --json: the socket and its messages).") var messages = false

    func validate() throws {
        if ids.isEmpty { throw ValidationError("give an exchange id (from `busymate list`) or a request id") }
        if !saveBody.isEmpty {
            guard saveBody.count == 2, Side(rawValue: saveBody[0]) != nil else {
                throw ValidationError("--save-body takes request or response, then a file: --save-body response out.bin")
            }
            guard ids.count == 1 else { throw ValidationError("--save-body takes one exchange") }
        }
        if json && (headers || body != nil) { throw ValidationError("--json shows everything; leave out --headers and --body") }
        if messages && (headers || body != nil || !saveBody.isEmpty) {
            throw ValidationError("--messages shows a WebSocket's messages; leave out --headers, --body and --save-body")
        }
    }

    func run() async throws {
        let database = try StoreAccess.open(options.paths)
        let traffic = TrafficRepository(database: database)
        let bodies = BodyStore(paths: database.paths)
        let records = try ids.map { try StoreAccess.exchange($0, in: traffic) }
        if messages {
            try showMessages(records, database: database)
            return
        }
        // Read only when a gRPC call is shown.
        let schema = records.contains(where: GRPCExchange.isGRPC) ? DescriptorSets.named(in: options.paths) : nil
        if saveBody.count == 2, let side = Side(rawValue: saveBody[0]), let record = records.first {
            let data = try ExchangeBody(record, side.direction, bodies: bodies, raw: raw).shown ?? Data()
            if saveBody[1] == "-" {
                FileHandle.standardOutput.write(data)
            } else {
                do {
                    try data.write(to: URL(fileURLWithPath: saveBody[1]))
                } catch {
                    throw CLIError(description: "cannot write \(saveBody[1]): \(error.localizedDescription)")
                }
                FileHandle.standardError.write(Data("\(data.count) bytes written to \(saveBody[1])\n".utf8))
            }
            return
        }
        if json {
            let nodes = try records.map { record in
                ExchangeJSON.detail(
                    record, resentFrom: try StoreAccess.resentFrom(record, in: traffic),
                    bodies: [
                        .request: try ExchangeBody(record, .request, bodies: bodies, raw: raw),
                        .response: try ExchangeBody(record, .response, bodies: bodies, raw: raw),
                    ],
                    breakpoints: (try? BreakpointRepository(database: database).events(requestID: record.requestID)) ?? [],
                    schema: schema)
            }
            ExchangeJSON.write(nodes.count == 1 ? nodes[0] : ExchangeJSON.array(nodes))
            return
        }
        var out: [String] = []
        for (i, record) in records.enumerated() {
            if i > 0 { out += ["", String(repeating: "─", count: 40), ""] }
            out += try lines(record, traffic: traffic, bodies: bodies, database: database, schema: schema)
        }
        Pager.print(Terminal.visible(out.joined(separator: "\n")) + "\n", page: !noPager)
    }

    private func lines(
        _ record: ExchangeRecord, traffic: TrafficRepository, bodies: BodyStore, database: CaptureDatabase, schema: DescriptorSets?
    ) throws -> [String] {
        if let body {
            return view(try ExchangeBody(record, body.direction, bodies: bodies, raw: raw))
        }
        var out: [String] = []
        if !headers {
            out.append("\(record.method) \(record.url)")
            out.append(
                "id \(record.id ?? 0) · request \(record.requestID) · \(record.tlsMode.rawValue)\(record.error.map { " · error: \($0)" } ?? "")"
            )
            let t0 = record.startedAt
            func at(_ d: Date?) -> String { d.map { String(format: "+%.1fms", $0.timeIntervalSince(t0) * 1000) } ?? "-" }
            out.append(
                "timing: started \(DatabaseDateText.iso8601(t0)), connected \(at(record.connectedAt)), TLS done \(at(record.tlsDoneAt)), first byte \(at(record.firstByteAt)), ended \(at(record.endedAt))"
            )
            if let client = record.clientAddress { out.append("client \(client)\(record.serverAddress.map { " → server \($0)" } ?? "")") }
            if let stream = record.streamID {
                out.append("stream \(stream)\(record.connectionID.map { " on connection \($0)" } ?? "")")
            } else if let connection = record.connectionID {
                out.append("connection \(connection)")
            }
            if record.resentFrom != nil {
                out.append(
                    "resent from \(try StoreAccess.resentFrom(record, in: traffic).map { "\($0)" } ?? "an exchange no longer stored")")
            }
            if let rule = record.rule { out.append("rule: \(rule)") }
            if let imported = record.imported { out.append("imported from \(imported)") }
            if let marker = record.marker { out.append("marked: \(marker)") }
            if let comment = record.comment { out.append("comment: \(comment)") }
            if let note = record.note { out.append("note: \(note)") }
            for event in (try? BreakpointRepository(database: database).events(requestID: record.requestID)) ?? [] {
                let held = (event.resumedAt ?? Date()).timeIntervalSince(event.pausedAt)
                out.append(
                    String(
                        format: "breakpoint %lld: %@ held %.1f s, %@", event.id ?? 0, event.kind.rawValue, held,
                        event.outcome?.rawValue ?? "still held"))
            }
            let tls = [record.sni.map { "SNI \($0)" }, record.tlsVersion, record.tlsCipher].compactMap { $0 }
            if !tls.isEmpty {
                out.append(
                    "tls: \(record.tlsMode.rawValue), " + tls.joined(separator: ", ") + (record.tlsMode == .mitm ? " (upstream)" : ""))
            }
            if let up = record.bytesUp, let down = record.bytesDown { out.append("tunnel: \(up) bytes up, \(down) bytes down") }
            if let id = record.id, let socket = try WebSocketRepository(database: database).socket(exchangeID: id) {
                out += MessageLines.socket(socket) + ["(its messages: busymate show \(id) --messages)"]
            }
            out.append("")
            if let grpc = GRPCExchange(
                record,
                bodies: [
                    .request: try ExchangeBody(record, .request, bodies: bodies, raw: false),
                    .response: try ExchangeBody(record, .response, bodies: bodies, raw: false),
                ],
                responseTrailers: GRPCExchange.storedTrailers(record), schema: schema)
            {
                out += grpc.lines() + [""]
            }
        }
        out.append("> \(record.method) \(record.path.isEmpty ? record.url : record.path) \(record.httpVersion ?? "HTTP/1.1")")
        for (name, value) in ExchangeRecord.decodeHeaders(record.requestHeaders) { out.append("> \(name): \(value)") }
        if !headers { out += section(view(try ExchangeBody(record, .request, bodies: bodies, raw: raw))) }
        out += trailers(record.requestTrailers, ">")
        if let status = record.status {
            out.append("")
            out.append("< \(status) \(record.reason ?? "")")
            for (name, value) in ExchangeRecord.decodeHeaders(record.responseHeaders) { out.append("< \(name): \(value)") }
            if !headers { out += section(view(try ExchangeBody(record, .response, bodies: bodies, raw: raw))) }
            out += trailers(record.responseTrailers, "<")
        }
        return out
    }

    private func section(_ lines: [String]) -> [String] { lines.isEmpty ? [] : [""] + lines }

    /// Trailers come after the body, as on the wire: `< trailer: grpc-status: 0`.
    private func trailers(_ json: String?, _ arrow: String) -> [String] {
        section(ExchangeRecord.decodeHeaders(json).map { "\(arrow) trailer: \($0.0): \($0.1)" })
    }

    /// A body as text: notes on how it is kept, then its bytes formatted.
    private func view(_ b: ExchangeBody) -> [String] {
        guard let stored = b.stored, !stored.isEmpty else { return b.wireSize > 0 ? ["(\(b.wireSize) bytes, not stored)"] : [] }
        var lines: [String] = []
        if let file = b.file { lines.append("(\(stored.count) bytes, stored in bodies/\(file))") }
        if let encoding = b.encoding, b.decoded {
            lines.append("(\(encoding), \(stored.count) bytes, shown decoded: \(b.shown?.count ?? 0) bytes)")
        } else if let why = b.undecodable {
            lines.append("(\(b.encoding ?? "encoded"): \(why); shown as stored)")
        }
        if let text = b.text {
            lines.append(!raw && b.isJSON ? JSONView.pretty(text) ?? text : text)
        } else if let shown = b.shown {
            lines.append("(\(shown.count) bytes of binary data)")
            let dump = HexDump.lines(shown.prefix(Self.hexDumpLimit))
            lines += dump
            if shown.count > Self.hexDumpLimit {
                lines.append("(\(shown.count - Self.hexDumpLimit) more bytes: --save-body \(b.direction.rawValue) FILE writes them all)")
            }
        }
        if b.truncated { lines.append("(stored \(stored.count) of \(b.wireSize) bytes)") }
        return lines
    }

    static let hexDumpLimit = 64 * 1024

    /// `--messages`: each socket's state, then its messages.
    private func showMessages(_ records: [ExchangeRecord], database: CaptureDatabase) throws {
        let sockets = WebSocketRepository(database: database)
        var nodes: [JSONNode] = []
        var out: [String] = []
        for record in records {
            guard let id = record.id, let socket = try sockets.socket(exchangeID: id) else {
                throw CLIError(
                    description: "exchange \(record.id ?? 0) (\(record.method) \(record.url)) is no WebSocket: it has no messages")
            }
            let list = try sockets.messages(of: record, limit: Int.max)
            if json {
                nodes.append(
                    ExchangeJSON.object([
                        ("id", ExchangeJSON.number(id)), ("request_id", ExchangeJSON.string(record.requestID)),
                        ("url", ExchangeJSON.string(record.url)), ("websocket", WebSocketJSON.socket(socket)),
                        ("messages", ExchangeJSON.array(try list.map { WebSocketJSON.message($0, payload: try sockets.payload($0)) })),
                    ]))
                continue
            }
            if !out.isEmpty { out += ["", String(repeating: "─", count: 40), ""] }
            out.append("\(record.method) \(record.url) · id \(id)")
            out += MessageLines.socket(socket)
            for message in list {
                out.append("")
                out.append(MessageLines.header(message))
                out += MessageLines.payload(message, try sockets.payload(message), raw: raw)
            }
        }
        if json {
            ExchangeJSON.write(nodes.count == 1 ? nodes[0] : ExchangeJSON.array(nodes))
        } else {
            Pager.print(Terminal.visible(out.joined(separator: "\n")) + "\n", page: !noPager)
        }
    }
}
