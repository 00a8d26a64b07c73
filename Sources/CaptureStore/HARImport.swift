import BusymateShared
import Foundation

/// A HAR 1.2 file (Chrome DevTools, Charles, Proxyman, Firefox, our own
/// export) as exchanges, marked `imported` with the file's name. Bodies
/// are HAR's decoded text, so a `Content-Encoding` header is dropped.
public enum HARImport {
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Every entry of `data` as a record (a small file: the web page's
    /// import reads a large one a chunk at a time, `HARImporter`).
    public static func records(_ data: Data, name: String) throws -> [ExchangeRecord] {
        try HAREntryScanner.entries(in: data).enumerated().map { i, range in try record(data, range, number: i + 1, name: name) }
    }

    /// The entry at `range` of `data` (the scanner's), the `number`th.
    static func record(_ data: Data, _ range: Range<Int>, number: Int, name: String) throws -> ExchangeRecord {
        try entry(data, range, number: number, name: name).record
    }

    /// The entry as a record and, for a WebSocket with Chrome's
    /// `_webSocketMessages`, its socket's events (opened, messages, closed).
    static func entry(_ data: Data, _ range: Range<Int>, number: Int, name: String) throws -> (
        record: ExchangeRecord, sockets: [WebSocketEvent]
    ) {
        do {
            let start = data.startIndex + range.lowerBound
            guard let entry = try? JSONSerialization.jsonObject(with: data[start..<(start + range.count)]) as? [String: Any] else {
                throw Failure(description: "not a JSON object")
            }
            let r = try record(entry, name: name)
            return (r, socketEvents(entry, r))
        } catch let failure as Failure {
            throw Failure(description: "entry \(number): \(failure.description)")
        }
    }

    /// Messages without a time or a known opcode are kept, as binary at the socket's start.
    static func socketEvents(_ entry: [String: Any], _ r: ExchangeRecord) -> [WebSocketEvent] {
        guard r.status == 101, let list = entry["_webSocketMessages"] as? [[String: Any]] else { return [] }
        let messages: [WebSocketMessageRecord] = list.enumerated().compactMap { i, m in
            guard let type = m["type"] as? String, let data = m["data"] as? String else { return nil }
            let opcode: WebSocketMessageRecord.Opcode = number(m["opcode"]) == 1 ? .text : .binary
            let payload = opcode == .text ? Data(data.utf8) : Data(base64Encoded: data) ?? Data(data.utf8)
            let at = number(m["time"]).map { Date(timeIntervalSince1970: $0) }.map { min(max($0, earliest), latest) } ?? r.startedAt
            return WebSocketMessageRecord(
                requestID: r.requestID, seq: i + 1, at: at, fromClient: type == "send", opcode: opcode, length: payload.count,
                wireLength: payload.count, payload: payload, stored: payload.count)
        }
        let extensions = ExchangeRecord.decodeHeaders(r.responseHeaders).first { $0.0.lowercased() == "sec-websocket-extensions" }?.1
        let end = messages.last?.at ?? r.endedAt ?? r.startedAt
        return [
            .opened(.init(requestID: r.requestID, at: r.startedAt, tunnelPID: 0, extensions: extensions)), .messages(messages),
            .closed(
                .init(
                    requestID: r.requestID, at: end, pings: 0, pongs: 0, closeCode: nil, closeReason: nil, closedBy: nil,
                    bytesUp: r.bytesUp ?? 0, bytesDown: r.bytesDown ?? 0, error: r.error)),
        ]
    }

    static func record(_ entry: [String: Any], name: String) throws -> ExchangeRecord {
        guard let request = entry["request"] as? [String: Any], let method = request["method"] as? String,
            let url = request["url"] as? String,
            let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
            ["http", "https", "ws", "wss"].contains(scheme),
            let host = parts.host, !host.isEmpty
        else {
            throw Failure(description: "no request with a method and an absolute http(s) URL")
        }
        guard !method.isEmpty, method.count <= 32, method.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "-" || $0 == "_") }) else {
            throw Failure(description: "\"\(method.prefix(40))\" is not a method")
        }
        // Dates a store can hold and read back (a year 9999 start ends in year 10000).
        let started = (entry["startedDateTime"] as? String).flatMap(parseDate).map { min(max($0, earliest), latest) } ?? Date()
        var path = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        if let query = parts.percentEncodedQuery { path += "?" + query }
        var r = ExchangeRecord(
            startedAt: started, scheme: scheme, method: method.uppercased(), host: host.lowercased(),
            port: parts.port ?? (scheme == "https" ? 443 : 80), path: path, url: url, tlsMode: scheme == "https" ? .mitm : .none)
        r.imported = name
        r.httpVersion = version(request["httpVersion"])
        r.requestHeaders = ExchangeRecord.encodeHeaders(headers(request["headers"]))
        if let post = request["postData"] as? [String: Any], let text = post["text"] as? String {
            r.requestBody = Data(text.utf8)
            r.requestBodySize = r.requestBody?.count ?? 0
        }
        if let response = entry["response"] as? [String: Any],
            let status = number(response["status"]).flatMap({ Int(exactly: $0.rounded()) }),
            (100...999).contains(status)
        {
            r.status = status
            r.reason = response["statusText"] as? String
            r.responseHeaders = ExchangeRecord.encodeHeaders(
                headers(response["headers"]).filter { $0.0.lowercased() != "content-encoding" })
            if let content = response["content"] as? [String: Any], let text = content["text"] as? String {
                let body = content["encoding"] as? String == "base64" ? Data(base64Encoded: text) ?? Data(text.utf8) : Data(text.utf8)
                r.responseBody = body
                r.responseBodySize = body.count
            }
        }
        // A day at most: a time or timing past that is not one.
        let total = min(max(0, number(entry["time"]) ?? 0), 86_400_000)
        r.endedAt = started.addingTimeInterval(total / 1000)
        if let timings = entry["timings"] as? [String: Any] {
            func ms(_ key: String) -> Double { min(max(0, number(timings[key]) ?? 0), 86_400_000) }
            let connect = ms("blocked") + ms("dns") + ms("connect")
            r.connectedAt = started.addingTimeInterval((ms("blocked") + ms("dns") + ms("connect") - ms("ssl")) / 1000)
            if ms("ssl") > 0 { r.tlsDoneAt = started.addingTimeInterval(connect / 1000) }
            r.firstByteAt = started.addingTimeInterval((connect + ms("send") + ms("wait")) / 1000)
        }
        if let server = entry["serverIPAddress"] as? String, !server.isEmpty {
            r.serverAddress = server.contains(":") ? "[\(server)]:\(r.port)" : "\(server):\(r.port)"
        }
        // Busymate's own export carries these; Chrome writes its connection id in `connection` (a
        // number as text), Firefox the server's port, which is no connection: left out.
        if let connection = entry["connection"] as? String, (1...64).contains(connection.count), connection != String(r.port),
            connection.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:".contains($0)) })
        {
            r.connectionID = connection
        }
        if let stream = number(entry["_streamId"]).flatMap({ Int(exactly: $0) }), (1...Int(Int32.max)).contains(stream) {
            r.streamID = stream
        }
        r.requestTrailers = trailers(request["_trailers"])
        r.responseTrailers = (entry["response"] as? [String: Any]).flatMap { trailers($0["_trailers"]) }
        if let error = entry["_error"] as? String { r.error = error }
        // A user's note and mark come back; one that would be refused from the CLI is left out.
        let comment = (entry["comment"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        if (try? AnnotationRepository.validate(.init(comment: .some(comment)))) != nil { r.comment = comment }
        let marker = entry["_marker"] as? String
        if marker != nil, (try? AnnotationRepository.validate(.init(marker: .some(marker)))) != nil { r.marker = marker }
        // Bodies live in the row: `capture.max_bytes` counts them.
        r.storedBytes = (r.requestBody?.count ?? 0) + (r.responseBody?.count ?? 0)
        return r
    }

    /// Header pairs; a name that is no token, or a value with a line break, is left out.
    static func headers(_ value: Any?) -> [(String, String)] {
        ((value as? [[String: Any]]) ?? []).compactMap { h in
            guard let name = h["name"] as? String, let value = h["value"] as? String, !name.isEmpty,
                name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_!#$%&'*+.^`|~".contains($0)) }),
                !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" })
            else { return nil }
            return (name, value)
        }
    }

    /// `_trailers` as headers are read; nil when there are none.
    static func trailers(_ value: Any?) -> String? {
        let pairs = headers(value)
        return pairs.isEmpty ? nil : ExchangeRecord.encodeHeaders(pairs)
    }

    static let earliest = Date(timeIntervalSince1970: 0)
    static let latest = Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01

    static func number(_ value: Any?) -> Double? {
        guard let double = (value as? NSNumber)?.doubleValue, double.isFinite else { return nil }
        return double
    }

    static func version(_ value: Any?) -> String? {
        guard let text = (value as? String)?.uppercased(), !text.isEmpty else { return nil }
        // As Busymate stores them (mitmproxy's): Chrome writes `http/2.0`, Firefox `HTTP/2`, some `h2`, `h3`.
        switch text {
        case "H2", "HTTP/2", "HTTP/2.0": return "HTTP/2.0"
        case "H3", "HTTP/3", "HTTP/3.0": return "HTTP/3"
        default: return text
        }
    }

    static func parseDate(_ text: String) -> Date? {
        (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle()))
    }
}
