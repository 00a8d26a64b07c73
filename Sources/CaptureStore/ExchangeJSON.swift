import BusymateShared
import Foundation

/// The JSON of exchanges, the CLI's and the web API's (docs/usage.md, "JSON output"): written here, key
/// by key, so the shape is the documented one and not a storage detail.
/// Times are RFC 3339 with milliseconds, headers `[name, value]` pairs in
/// order, exchanges named by their ids.
public enum ExchangeJSON {
    public typealias Member = (key: String, node: JSONNode)

    public static func string(_ s: String?) -> JSONNode { JSONNode(s.map { .string($0) } ?? .null) }
    public static func number(_ n: (any BinaryInteger)?) -> JSONNode { JSONNode(n.map { .number(String($0)) } ?? .null) }
    public static func bool(_ b: Bool) -> JSONNode { JSONNode(.bool(b)) }
    public static func date(_ d: Date?) -> JSONNode { string(d.map(DatabaseDateText.iso8601)) }
    public static func object(_ members: [Member]) -> JSONNode { JSONNode(.object(members)) }
    public static func array(_ nodes: [JSONNode]) -> JSONNode { JSONNode(.array(nodes)) }

    public static func headers(_ json: String?) -> JSONNode {
        array(ExchangeRecord.decodeHeaders(json).map { array([string($0.0), string($0.1)]) })
    }

    /// A row of `list --json` (and `tail --json`, one per line).
    public static func summary(_ r: ExchangeRecord, resentFrom: Int64?) -> JSONNode { object(summaryMembers(r, resentFrom: resentFrom)) }

    public static func summaryMembers(_ r: ExchangeRecord, resentFrom: Int64?) -> [Member] {
        [
            ("id", number(r.id)), ("request_id", string(r.requestID)), ("started_at", date(r.startedAt)),
            ("method", string(r.method)), ("url", string(r.url)), ("host", string(r.host)), ("status", number(r.status)),
            ("reason", string(r.reason)),
            ("tls", string(r.tlsMode.rawValue)), ("duration_ms", number(r.durationMilliseconds)), ("error", string(r.error)),
            ("resent_from", number(resentFrom)), ("rule", string(r.rule)),
            // Body sizes as they crossed the wire; the content types as declared.
            ("request_size", number(r.requestBodySize)), ("response_size", number(r.responseBodySize)),
            ("request_content_type", string(r.header("content-type", .request))),
            ("response_content_type", string(r.header("content-type", .response))),
            ("imported", string(r.imported)),
            ("device", string(r.device)), ("front_end", string(r.frontEnd)),
            ("marker", string(r.marker)), ("comment", string(r.comment)), ("note", string(r.note)),
            // Last, so the web API's `held` keeps its place after `rule`.
            ("http_version", string(r.httpVersion)), ("stream_id", number(r.streamID)), ("connection_id", string(r.connectionID)),
        ]
    }

    /// Trailers as headers are written, or null when there were none.
    public static func trailers(_ json: String?) -> JSONNode {
        json == nil ? JSONNode(.null) : headers(json)
    }

    /// `show --json`: a `list --json` row, then everything else about the
    /// exchange, bodies whole.
    public static func detail(
        _ r: ExchangeRecord, resentFrom: Int64?, bodies: [BodyStore.Direction: ExchangeBody], breakpoints: [BreakpointEvent],
        schema: DescriptorSets? = nil
    ) -> JSONNode {
        object(detailMembers(r, resentFrom: resentFrom, bodies: bodies, breakpoints: breakpoints, schema: schema))
    }

    /// The members of `detail`, each body written by `body` (the web API
    /// writes them without their bytes); a gRPC call's messages read with
    /// `schema`'s types when it names them.
    public static func detailMembers(
        _ r: ExchangeRecord, resentFrom: Int64?, bodies: [BodyStore.Direction: ExchangeBody], breakpoints: [BreakpointEvent],
        schema: DescriptorSets? = nil, body: (ExchangeBody) -> JSONNode = ExchangeJSON.body
    ) -> [Member] {
        var request: [Member] = [
            ("method", string(r.method)), ("url", string(r.url)), ("scheme", string(r.scheme)), ("host", string(r.host)),
            ("port", number(r.port)), ("path", string(r.path)), ("http_version", string(r.httpVersion)),
            ("headers", headers(r.requestHeaders)),
        ]
        request.append(("body", bodies[.request].map(body) ?? JSONNode(.null)))
        request.append(("trailers", trailers(r.requestTrailers)))
        var response: JSONNode = JSONNode(.null)
        if let status = r.status {
            response = object([
                ("status", number(status)), ("reason", string(r.reason)), ("headers", headers(r.responseHeaders)),
                ("body", bodies[.response].map(body) ?? JSONNode(.null)),
                ("trailers", trailers(r.responseTrailers)),
            ])
        }
        // A gRPC call's messages, decoded (docs/usage.md, "gRPC").
        let grpc: [Member] =
            GRPCExchange(r, bodies: bodies, responseTrailers: GRPCExchange.storedTrailers(r), schema: schema).map { [("grpc", $0.json())] }
            ?? []
        return summaryMembers(r, resentFrom: resentFrom) + [
            ("connected_at", date(r.connectedAt)), ("tls_done_at", date(r.tlsDoneAt)),
            ("first_byte_at", date(r.firstByteAt)), ("ended_at", date(r.endedAt)),
            ("client_address", string(r.clientAddress)), ("server_address", string(r.serverAddress)),
            // What the server chose (upstream, for an intercepted exchange), and the client's SNI.
            ("tls_handshake", object([("sni", string(r.sni)), ("version", string(r.tlsVersion)), ("cipher", string(r.tlsCipher))])),
            ("bytes_up", number(r.bytesUp)), ("bytes_down", number(r.bytesDown)),
            ("request", object(request)), ("response", response),
            (
                "breakpoints",
                array(
                    breakpoints.map { event in
                        object([
                            ("id", number(event.id)), ("kind", string(event.kind.rawValue)), ("paused_at", date(event.pausedAt)),
                            ("expires_at", date(event.expiresAt)),
                            ("resumed_at", date(event.resumedAt)), ("outcome", string(event.outcome?.rawValue)),
                        ])
                    })
            ),
        ] + grpc
    }

    /// A body: sizes, where it is kept, and its bytes (decoded unless
    /// `--raw`) as text when they are UTF-8, else base64.
    public static func body(_ b: ExchangeBody) -> JSONNode {
        var members: [Member] = [
            ("size", number(b.wireSize)), ("decoded_size", number(b.decodedSize)), ("content_type", string(b.contentType)),
            ("content_encoding", string(b.encoding)),
            ("decoded", bool(b.decoded)), ("stored", number(b.stored?.count ?? 0)), ("truncated", bool(b.truncated)),
            ("file", string(b.file.map { "bodies/\($0)" })),
        ]
        if let text = b.text {
            members.append(("text", string(text)))
        } else if let bytes = b.shown {
            members.append(("base64", string(bytes.base64EncodedString())))
        }
        return object(members)
    }
}

extension ExchangeRecord {
    /// The first value of a header of one side, by case-insensitive name.
    public func header(_ name: String, _ direction: BodyStore.Direction) -> String? {
        ExchangeRecord.decodeHeaders(direction == .request ? requestHeaders : responseHeaders)
            .first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
    }
}

extension ExchangeRecord {
    public var durationMilliseconds: Int? {
        endedAt.map { Int(($0.timeIntervalSince(startedAt) * 1000).rounded()) }
    }
}
