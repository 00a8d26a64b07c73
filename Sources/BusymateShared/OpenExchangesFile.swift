import Foundation

/// `open-exchanges.json` in the group: the exchanges the tunnel has begun
/// and not yet stored (in flight, or held at a breakpoint), rewritten by the
/// tunnel at most four times a second while they change. `list`, `status`
/// and `tail` read it; nothing per request touches the store.
public struct OpenExchangesFile: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var requestID: String
        public var startedAt: Date
        public var method: String
        public var url: String
        public var client: String?
        public init(requestID: String, startedAt: Date, method: String, url: String, client: String?) {
            (self.requestID, self.startedAt, self.method, self.url, self.client) = (requestID, startedAt, method, url, client)
        }
    }

    public var pid: Int32
    /// All open, though `entries` keeps only the oldest `limit`.
    public var count: Int
    public var entries: [Entry]
    public static let limit = 200

    public init(pid: Int32, count: Int, entries: [Entry]) {
        (self.pid, self.count, self.entries) = (pid, count, entries)
    }

    public func encoded() -> Data {
        let items = entries.map { e in
            JSONNode(
                .object([
                    ("request_id", JSONNode(.string(e.requestID))),
                    ("started_at", JSONNode(.number(String(e.startedAt.timeIntervalSince1970)))),
                    ("method", JSONNode(.string(e.method))), ("url", JSONNode(.string(e.url))),
                    ("client", JSONNode(e.client.map { .string($0) } ?? .null)),
                ]))
        }
        let root = JSONNode(
            .object([
                ("pid", JSONNode(.number(String(pid)))), ("count", JSONNode(.number(String(count)))),
                ("exchanges", JSONNode(.array(items))),
            ]))
        return Data((JSONWriter.compact(root) + "\n").utf8)
    }

    /// The file of a live tunnel, or nil (none, unreadable, or its writer gone).
    public static func read(_ paths: GroupPaths) -> OpenExchangesFile? {
        guard let data = try? Data(contentsOf: paths.openExchanges), let root = try? JSONParser.parse(Array(data)),
            case let .number(pidText)? = root["pid"]?.value, let pid = Int32(pidText), ProcessProbe.isAlive(pid),
            case let .number(countText)? = root["count"]?.value, let count = Int(countText),
            case let .array(items)? = root["exchanges"]?.value
        else { return nil }
        let entries: [Entry] = items.compactMap { item in
            guard case let .string(id)? = item["request_id"]?.value, case let .number(started)? = item["started_at"]?.value,
                let seconds = Double(started), case let .string(method)? = item["method"]?.value,
                case let .string(url)? = item["url"]?.value
            else { return nil }
            var client: String?
            if case let .string(text)? = item["client"]?.value { client = text }
            return Entry(requestID: id, startedAt: Date(timeIntervalSince1970: seconds), method: method, url: url, client: client)
        }
        return OpenExchangesFile(pid: pid, count: count, entries: entries)
    }
}
