import BusymateShared
import CaptureStore
import Foundation

/// The web API's exchange shapes: the CLI's list row plus what the page
/// marks, and bodies described rather than inlined.
enum WebRows {
    /// A list row: `list --json`'s, with `held`.
    static func row(_ r: ExchangeRecord, held: Bool, resentFrom: Int64?) -> JSONNode {
        var members = ExchangeJSON.summaryMembers(r, resentFrom: resentFrom)
        members.insert(("held", ExchangeJSON.bool(held)), at: heldIndex)
        return ExchangeJSON.object(members)
    }

    /// Rows for `records`, with what they need from the store: which are
    /// held, and the ids of the exchanges resent ones came from.
    static func rows(_ records: [ExchangeRecord], _ repos: CaptureReader.Repositories) throws -> [JSONNode] {
        let held = (try? repos.breakpoints.held(among: records.map(\.requestID))) ?? []
        let sockets = try repos.sockets.sockets(exchangeIDs: records.filter { $0.status == 101 }.compactMap(\.id))
        return try records.map { r in
            var members = ExchangeJSON.summaryMembers(r, resentFrom: try r.resentFrom.flatMap { try repos.traffic.find(requestID: $0)?.id })
            members.insert(("held", ExchangeJSON.bool(held.contains(r.requestID))), at: heldIndex)
            // A WebSocket's row carries its socket (its messages so far, open or closed), as `list --json`'s does.
            if let socket = r.id.flatMap({ sockets[$0] }) { members.append(("websocket", WebSocketJSON.socket(socket))) }
            return ExchangeJSON.object(members)
        }
    }

    /// After `rule`, so rows and details read alike.
    static var heldIndex: Int { 12 }

    enum Kind: String { case empty, json, text, image, binary }

    static func kind(_ b: ExchangeBody) -> Kind {
        guard let shown = b.shown, !shown.isEmpty else { return .empty }
        if previewType(b.contentType) != nil { return .image }
        guard b.text != nil || utf8Prefix(shown, limit: 4096) != nil else { return .binary }
        return b.isJSON || looksLikeJSON(shown) ? .json : .text
    }

    /// A body without its bytes: sizes, how to fetch it, and its text when
    /// short enough to show at once.
    static func body(_ b: ExchangeBody, id: Int64, textLimit: Int) -> JSONNode {
        let side = b.direction.rawValue
        let kind = kind(b)
        var members: [ExchangeJSON.Member] = [
            ("size", ExchangeJSON.number(b.wireSize)), ("decoded_size", ExchangeJSON.number(b.decodedSize)),
            ("content_type", ExchangeJSON.string(b.contentType)), ("content_encoding", ExchangeJSON.string(b.encoding)),
            ("decoded", ExchangeJSON.bool(b.decoded)), ("stored", ExchangeJSON.number(b.stored?.count ?? 0)),
            ("truncated", ExchangeJSON.bool(b.truncated)), ("undecodable", ExchangeJSON.string(b.undecodable)),
            ("kind", ExchangeJSON.string(kind.rawValue)),
        ]
        if kind == .json || kind == .text, let shown = b.shown {
            let cut = shown.count > textLimit
            if let text = utf8Prefix(shown, limit: textLimit) {
                members.append(("text", ExchangeJSON.string(text)))
                members.append(("text_truncated", ExchangeJSON.bool(cut)))
            }
        }
        let base = "/api/exchanges/\(id)/\(side)/body"
        members += [
            ("raw_url", ExchangeJSON.string(base + "?raw=1")), ("decoded_url", ExchangeJSON.string(base)),
            ("download_url", ExchangeJSON.string(base + "?download=1")),
        ]
        if kind == .image { members.append(("preview_url", ExchangeJSON.string(base + "?preview=1"))) }
        return ExchangeJSON.object(members)
    }

    /// The text of the first `limit` bytes, cut at a character, when they
    /// are UTF-8 without the control characters text does not have.
    static func utf8Prefix(_ data: Data, limit: Int) -> String? {
        var end = min(data.count, limit)
        if end < data.count {
            // Back to a character's first byte.
            while end > 0, data[data.startIndex + end] & 0xC0 == 0x80 { end -= 1 }
        }
        let slice = data.prefix(end)
        guard !slice.contains(where: { $0 < 0x20 && ![0x09, 0x0A, 0x0D, 0x0C].contains($0) || $0 == 0x7F }) else { return nil }
        return String(validating: slice, as: UTF8.self)
    }

    static func looksLikeJSON(_ data: Data) -> Bool {
        guard let first = data.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { return false }
        return first == UInt8(ascii: "{") || first == UInt8(ascii: "[")
    }

    /// The image types a preview may answer with (not SVG: it is a document
    /// that can hold scripts).
    static func previewType(_ contentType: String?) -> String? {
        guard let type = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() else { return nil }
        let allowed = [
            "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/x-icon", "image/vnd.microsoft.icon", "image/avif",
        ]
        return allowed.contains(type) ? type : nil
    }

    static func fileExtension(_ contentType: String?) -> String {
        let type = contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        let known = [
            "application/json": ".json", "text/html": ".html", "text/plain": ".txt", "text/css": ".css", "application/javascript": ".js",
            "text/javascript": ".js", "image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
            "application/xml": ".xml", "text/xml": ".xml", "application/pdf": ".pdf", "image/svg+xml": ".svg",
        ]
        return known[type] ?? (type.hasSuffix("+json") ? ".json" : ".bin")
    }

    /// "Copy as cURL": a text body inline; another is named as the file
    /// "download body" saves.
    static func curl(_ record: ExchangeRecord, body: ExchangeBody?) -> String {
        var payload: CurlCommandLine.Payload?
        if let stored = body?.stored, !stored.isEmpty {
            payload = CurlCommandLine.shellText(stored).map { .text($0) } ?? .file("busymate-\(record.id ?? 0).request.bin")
        }
        return CurlCommandLine.command(for: record, payload: payload)
    }

    static func rawMessage(_ r: ExchangeRecord, _ direction: BodyStore.Direction, body: ExchangeBody) -> String {
        var lines: [String]
        let headers: String?
        if direction == .request {
            lines = ["\(r.method) \(r.path) \(r.httpVersion ?? "HTTP/1.1")"]
            headers = r.requestHeaders
        } else {
            guard let status = r.status else { return "(no response)" }
            lines = ["\(r.httpVersion ?? "HTTP/1.1") \(status) \(r.reason ?? "")"]
            headers = r.responseHeaders
        }
        lines += ExchangeRecord.decodeHeaders(headers).map { "\($0.0): \($0.1)" }
        var text = lines.joined(separator: "\r\n") + "\r\n\r\n"
        if let shown = body.shown, !shown.isEmpty {
            text += utf8Prefix(shown, limit: shown.count) ?? "[\(shown.count) bytes of binary body]"
        }
        return text
    }
}
