import BusymateShared
import Foundation

/// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) entries.
public enum HAR {
    /// Headers whose values are credentials: masked by `--redact`.
    public static let credentialHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token", "x-csrf-token",
        "x-xsrf-token",
    ]
    static let redacted = "[redacted]"

    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func milliseconds(_ from: Date?, _ to: Date?) -> Double {
        guard let from, let to else { return -1 }
        return max(0, (to.timeIntervalSince(from) * 1000 * 1000).rounded() / 1000)
    }

    static func headers(_ text: String?, redact: Bool = false) -> [[String: Any]] {
        ExchangeRecord.decodeHeaders(text).map {
            ["name": $0.0, "value": redact && credentialHeaders.contains($0.0.lowercased()) ? redacted : $0.1]
        }
    }

    static func header(_ name: String, in text: String?) -> String? {
        ExchangeRecord.decodeHeaders(text).first { $0.0.lowercased() == name }?.1
    }

    /// `httpVersion` as Chrome's DevTools writes it: `http/2.0` for HTTP/2
    /// (its `filteredProtocolName`), the status line's `HTTP/1.1` otherwise.
    static func version(_ stored: String?) -> String {
        guard let stored else { return "HTTP/1.1" }
        return stored == "HTTP/2.0" || stored == "HTTP/2" ? "http/2.0" : stored
    }

    static func queryString(_ url: String) -> [[String: Any]] {
        guard let items = URLComponents(string: url)?.queryItems else { return [] }
        return items.map { ["name": $0.name, "value": $0.value ?? ""] }
    }

    /// A body as HAR wants it: decoded, as text when it is UTF-8.
    static func text(_ body: Data, headers: String?, truncated: Bool) -> (text: String, base64: Bool, size: Int) {
        var data = body
        if !truncated, let encoding = header("content-encoding", in: headers), let decoded = BodyDecoder.decode(body, encoding: encoding) {
            data = decoded
        }
        if let text = String(data: data, encoding: .utf8) { return (text, false, data.count) }
        return (data.base64EncodedString(), true, data.count)
    }

    /// `sockets`: where a WebSocket's messages are read from, written as
    /// Chrome DevTools writes them (`_webSocketMessages`).
    public static func entry(_ r: ExchangeRecord, bodies: BodyStore, redact: Bool = false, sockets: WebSocketRepository? = nil) -> [String:
        Any]
    {
        // A body file removed under us leaves the row's first bytes.
        let requestBody = (try? bodies.body(of: r, .request)) ?? r.requestBody
        let responseBody = (try? bodies.body(of: r, .response)) ?? r.responseBody
        var request: [String: Any] = [
            "method": r.method, "url": r.url, "httpVersion": version(r.httpVersion), "cookies": [] as [Any],
            "headers": headers(r.requestHeaders, redact: redact), "queryString": queryString(r.url), "headersSize": -1,
            "bodySize": r.requestBodySize,
        ]
        if let body = requestBody {
            request["postData"] = [
                "mimeType": header("content-type", in: r.requestHeaders) ?? "", "text": String(decoding: body, as: UTF8.self),
            ]
        }
        var content: [String: Any] = [
            "size": r.responseBodyDecodedSize ?? r.responseBodySize, "mimeType": header("content-type", in: r.responseHeaders) ?? "",
        ]
        if let decoded = r.responseBodyDecodedSize, decoded >= r.responseBodySize { content["compression"] = decoded - r.responseBodySize }
        if let body = responseBody {
            let shown = text(body, headers: r.responseHeaders, truncated: r.responseBodyTruncated)
            content["text"] = shown.text
            if shown.base64 { content["encoding"] = "base64" }
            if r.responseBodyTruncated { content["comment"] = "stored truncated: \(body.count) of \(r.responseBodySize) bytes" }
        }
        // HAR has no place for trailers (Chrome leaves them out): a custom field, as headers are written.
        if r.requestTrailers != nil { request["_trailers"] = headers(r.requestTrailers, redact: redact) }
        var response: [String: Any] = [
            "status": r.status ?? 0, "statusText": r.reason ?? "", "httpVersion": version(r.httpVersion), "cookies": [] as [Any],
            "headers": headers(r.responseHeaders, redact: redact), "content": content,
            "redirectURL": header("location", in: r.responseHeaders) ?? "",
            "headersSize": -1, "bodySize": r.status == nil ? -1 : r.responseBodySize,
        ]
        if r.responseTrailers != nil { response["_trailers"] = headers(r.responseTrailers, redact: redact) }
        let connect = milliseconds(r.startedAt, r.tlsDoneAt ?? r.connectedAt)
        // HAR counts ssl inside connect.
        let ssl = r.tlsDoneAt == nil ? -1 : milliseconds(r.connectedAt, r.tlsDoneAt)
        let wait = milliseconds(r.tlsDoneAt ?? r.connectedAt ?? r.startedAt, r.firstByteAt)
        let receive = milliseconds(r.firstByteAt, r.endedAt)
        var entry: [String: Any] = [
            "startedDateTime": timestamp(r.startedAt),
            "time": max(0, milliseconds(r.startedAt, r.endedAt)),
            "request": request, "response": response, "cache": [:] as [String: Any],
            "timings": [
                "blocked": -1, "dns": -1, "connect": connect, "ssl": ssl, "send": 0, "wait": max(0, wait), "receive": max(0, receive),
            ],
            "_requestId": r.requestID,
        ]
        if let server = r.serverAddress {
            entry["serverIPAddress"] = server.split(separator: ":").dropLast().joined(separator: ":").trimmingCharacters(
                in: CharacterSet(charactersIn: "[]"))
        }
        // HAR 1.2's `connection` (Chrome writes its connection id there); the HTTP/2 stream beside it.
        if let connection = r.connectionID { entry["connection"] = connection }
        if let stream = r.streamID { entry["_streamId"] = stream }
        if let error = r.error { entry["_error"] = error }
        // HAR 1.2's own field for a note; the mark as mitmproxy's `marked`.
        if let comment = r.comment { entry["comment"] = comment }
        if let marker = r.marker { entry["_marker"] = marker }
        if r.status == 101, let sockets, let messages = try? webSocketMessages(r, sockets), !messages.isEmpty {
            entry["_resourceType"] = "websocket"
            entry["_webSocketMessages"] = messages
        }
        return entry
    }

    /// Chrome's shape: `type` send (client to server) or receive, `time` in
    /// seconds since 1970, `opcode` 1 text or 2 binary, `data` the text, or
    /// a binary payload in base64.
    static func webSocketMessages(_ r: ExchangeRecord, _ sockets: WebSocketRepository) throws -> [[String: Any]] {
        try sockets.messages(of: r, limit: Int.max).map { m in
            let payload = (try? sockets.payload(m)) ?? nil
            let text = m.opcode == .text ? payload.flatMap { String(validating: $0, as: UTF8.self) } : nil
            return [
                "type": m.fromClient ? "send" : "receive", "time": m.at.timeIntervalSince1970, "opcode": m.opcode.rawValue,
                "data": text ?? payload?.base64EncodedString() ?? "",
            ]
        }
    }

    /// Tunnels have no HTTP to show.
    public static func isExported(_ r: ExchangeRecord) -> Bool { r.tlsMode != .passthrough && r.method != "CONNECT" }

    public static var creator: [String: Any] { ["name": "Busymate", "version": BusymateVersion.current] }

    /// A HAR file of `records` (newest first, as `list` gives them),
    /// oldest first as a browser records them; tunnels have no HTTP to
    /// show. Returns it and how many entries it has.
    public static func document(_ records: [ExchangeRecord], bodies: BodyStore, redact: Bool, sockets: WebSocketRepository? = nil) throws
        -> (Data, Int)
    {
        let entries = records.reversed().filter(isExported).map { entry($0, bodies: bodies, redact: redact, sockets: sockets) }
        let document: [String: Any] = [
            "log": [
                "version": "1.2",
                "creator": creator,
                "pages": [] as [Any],
                "entries": entries,
            ] as [String: Any]
        ]
        return (
            try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]),
            entries.count
        )
    }
}
