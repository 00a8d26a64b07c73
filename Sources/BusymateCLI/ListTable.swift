import BusymateShared
import CaptureStore
import Foundation

/// `busymate list` as a table: a header row; id, time (with the date when
/// not today), method, status, response size and type, duration, flags
/// (`R` a rule applied, `B` held at a breakpoint, `P` TLS passed through
/// undecrypted, `M` marked, `S` sent again, `I` imported), the URL and, for a failed exchange, why. Columns are as
/// wide as their widest cell. On a terminal the URL is shortened to fit
/// its width; to a pipe every line is whole.
struct ListTable {
    var terminal: Terminal
    var now = Date()

    private struct Column {
        var title: String
        var right = false
    }

    private static let columns = [
        Column(title: "ID", right: true), Column(title: "TIME"), Column(title: "METHOD"), Column(title: "CODE"),
        Column(title: "SIZE", right: true), Column(title: "TYPE"), Column(title: "DUR", right: true), Column(title: ""),
    ]

    /// `open`: exchanges in flight (not stored yet), shown first, newest
    /// first, with how long they have been open; `held` marks those at a breakpoint.
    /// A WebSocket's row shows its messages for a size, `ws` for a type, and `open` while it is.
    func render(
        _ records: [ExchangeRecord], held: Set<String>, open: [OpenExchangesFile.Entry] = [], sockets: [Int64: WebSocketRecord] = [:]
    ) -> String {
        let dated = (records.map(\.startedAt) + open.map(\.startedAt)).contains { !Calendar.current.isDate($0, inSameDayAs: now) }
        let time = DateFormatter()
        time.dateFormat = dated ? "MM-dd HH:mm:ss" : "HH:mm:ss"
        let rows: [[String]] = records.map { r in
            let flags =
                (r.rule != nil ? "R" : "") + (held.contains(r.requestID) ? "B" : "") + (r.tlsMode == .passthrough ? "P" : "")
                + (r.marker != nil ? "M" : "") + (r.resentFrom != nil ? "S" : "") + (r.imported != nil ? "I" : "")
            if let socket = r.id.flatMap({ sockets[$0] }) {
                let messages = socket.messagesUp + socket.messagesDown
                return [
                    String(r.id ?? 0), time.string(from: r.startedAt), r.method, Self.status(r), "\(messages) msg", "ws",
                    socket.isOpen ? "open" : r.durationMilliseconds.map(Self.duration) ?? "-", flags,
                ]
            }
            return [
                String(r.id ?? 0), time.string(from: r.startedAt), r.method, Self.status(r),
                r.status == nil ? "-" : Self.size(r.responseBodySize), Self.kind(r.header("content-type", .response)),
                r.durationMilliseconds.map(Self.duration) ?? "-", flags,
            ]
        }
        let inFlight: [[String]] = open.sorted { $0.startedAt > $1.startedAt }.map { e in
            let isHeld = held.contains(e.requestID)
            return [
                "-", time.string(from: e.startedAt), e.method, isHeld ? "held" : "…", "-", "",
                Self.duration(max(0, Int(now.timeIntervalSince(e.startedAt) * 1000))), isHeld ? "B" : "",
            ]
        }
        let widths = Self.columns.indices.map { i in (rows + inFlight).reduce(Self.columns[i].title.count) { max($0, $1[i].count) } }
        func line(_ cells: [String]) -> String {
            zip(Self.columns, zip(cells, widths)).compactMap { column, cell in
                let (text, width) = cell
                guard width > 0 else { return nil }
                return column.right ? text.leftPadded(width, with: " ") : text.padding(toLength: width, withPad: " ", startingAt: 0)
            }.joined(separator: " ")
        }
        var lines = [terminal.paint(line(Self.columns.map(\.title)) + " URL", .bold)]
        for (e, cells) in zip(open.sorted { $0.startedAt > $1.startedAt }, inFlight) {
            let prefix = line(cells) + " "
            let room = terminal.width.map { $0 - prefix.count } ?? Int.max
            let url = Terminal.visible(e.url, keepNewlines: false)
            lines.append(terminal.paint(prefix + (url.count > room ? Self.shorten(url, to: max(24, room)) : url), .dim))
        }
        for (r, cells) in zip(records, rows) {
            let prefix = line(cells) + " "
            var url = Terminal.visible(r.url, keepNewlines: false)
            let note = Self.note(r)
            var trailing = note.map { "  \($0.text)" } ?? ""
            var below: String?
            if let width = terminal.width {
                // The URL keeps the line; a note that does not fit beside it
                // goes on a line of its own, under the URL, cut to the width.
                let room = width - prefix.count
                if url.count + trailing.count > room {
                    url = url.count > room ? Self.shorten(url, to: max(24, room)) : url
                    if let note {
                        let indent = String(repeating: " ", count: min(prefix.count, max(0, width - 24)))
                        below = indent + Self.shorten(note.text, to: max(8, width - indent.count))
                    }
                    trailing = ""
                }
            }
            // Colour the status in place: the cells before it are plain text.
            let statusAt = prefix.index(prefix.startIndex, offsetBy: widths[0...2].reduce(0, +) + 3)
            let statusEnd = prefix.index(statusAt, offsetBy: widths[3])
            let painted =
                String(prefix[..<statusAt]) + terminal.paint(String(prefix[statusAt..<statusEnd]), Self.colour(r))
                + String(prefix[statusEnd...])
            let style: Terminal.Colour = note?.isError == true ? .red : .dim
            lines.append(painted + url + (trailing.isEmpty ? "" : terminal.paint(trailing, style)))
            if let below { lines.append(terminal.paint(below, style)) }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// What follows the URL: why it failed, else which rule applied, that
    /// it was sent again or imported, and its comment.
    static func note(_ r: ExchangeRecord) -> (text: String, isError: Bool)? {
        if let error = r.error { return ("! " + Terminal.visible(error, keepNewlines: false), true) }
        var parts: [String] = []
        if let rule = r.rule { parts.append("rule \(rule)") }
        if r.resentFrom != nil { parts.append("resent") }
        if let imported = r.imported { parts.append("imported from \(imported)") }
        if let comment = r.comment { parts.append("“\(comment)”") }
        if let note = r.note { parts.append("note: \(note)") }
        guard !parts.isEmpty else { return nil }
        return (Terminal.visible("· " + parts.joined(separator: " · "), keepNewlines: false), false)
    }

    /// `…` only while it is under way; a row that ended without a status
    /// (a transparent tunnel, which no status line opened) shows `-`.
    static func status(_ r: ExchangeRecord) -> String {
        r.status.map(String.init) ?? (r.error != nil ? "ERR" : r.endedAt == nil ? "…" : "-")
    }

    static func colour(_ r: ExchangeRecord) -> Terminal.Colour? {
        switch r.status {
        case .some(200..<300): return .green
        case .some(300..<400): return .cyan
        case .some(400..<500): return .yellow
        case .some: return .red
        case .none: return r.error == nil ? nil : .red
        }
    }

    /// Keeps the start (scheme, host, path) and the end, with `…` between.
    static func shorten(_ text: String, to width: Int) -> String {
        guard text.count > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        let tail = min(12, (width - 1) / 3)
        return String(text.prefix(width - 1 - tail)) + "…" + String(text.suffix(tail))
    }

    static func size(_ bytes: Int) -> String {
        switch bytes {
        case ..<1024: return "\(bytes)"
        case ..<(1024 * 1024): return String(format: "%.1fK", Double(bytes) / 1024)
        case ..<(1024 * 1024 * 1024): return String(format: "%.1fM", Double(bytes) / 1_048_576)
        default: return String(format: "%.1fG", Double(bytes) / 1_073_741_824)
        }
    }

    static func duration(_ ms: Int) -> String {
        ms < 1000 ? "\(ms)ms" : ms < 60_000 ? String(format: "%.1fs", Double(ms) / 1000) : "\(ms / 60_000)m\((ms / 1000) % 60)s"
    }

    /// A short name for a content type: `json`, `html`, `png`…
    static func kind(_ contentType: String?) -> String {
        guard let contentType else { return "" }
        let essence = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        if essence.contains("json") { return "json" }
        if essence.hasSuffix("javascript") || essence.hasSuffix("ecmascript") { return "js" }
        if essence == "application/x-www-form-urlencoded" { return "form" }
        if essence.hasPrefix("multipart/") { return "multi" }
        if essence == "application/octet-stream" { return "bin" }
        let subtype = essence.split(separator: "/").last.map(String.init) ?? essence
        let plain = subtype.split(separator: "+").last.map(String.init) ?? subtype
        let short = plain.hasPrefix("x-") ? String(plain.dropFirst(2)) : plain
        return short == "plain" ? "text" : String(short.prefix(5))
    }
}
