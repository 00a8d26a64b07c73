import BusymateShared
import CaptureStore
import Foundation

/// WebSocket messages as `show --messages` and `tail --messages` print
/// them: an arrow for the direction (→ client to server, ← server to
/// client), the time, the number and kind, then the payload: text as
/// sent (JSON pretty-printed from its own bytes), binary as a hex dump.
enum MessageLines {
    static func socket(_ s: WebSocketRecord) -> [String] {
        var state = s.isOpen ? "open" : "closed"
        if let by = s.closedBy {
            state += " by the \(by)" + (s.closeCode.map { " (\($0)\(s.closeReason.map { " \($0)" } ?? ""))" } ?? "")
        }
        var lines = [
            "websocket: \(state) · \(s.messagesUp) message\(s.messagesUp == 1 ? "" : "s") up, \(s.messagesDown) down · \(s.pings) ping\(s.pings == 1 ? "" : "s"), \(s.pongs) pong\(s.pongs == 1 ? "" : "s")"
        ]
        if let extensions = s.extensions { lines.append("extensions: \(extensions)") }
        return lines
    }

    static func header(_ m: WebSocketMessageRecord, exchangeID: Int64? = nil) -> String {
        let time = DateFormatter()
        time.dateFormat = "HH:mm:ss.SSS"
        var parts = [
            "\(m.fromClient ? "→" : "←") \(time.string(from: m.at))", exchangeID.map { "\($0)#\(m.seq)" } ?? "#\(m.seq)",
            m.opcode == .text ? "text" : "binary", "\(m.length) B",
        ]
        if m.compressed { parts.append("(compressed \(m.wireLength) B)") }
        if m.frames > 1 { parts.append("\(m.frames) frames") }
        if m.origin != .relayed { parts.append(m.origin.rawValue) }
        if m.truncated { parts.append("stored \(m.stored) of \(m.length) B") }
        return parts.joined(separator: " ")
    }

    /// `limit`: the most bytes shown (a hex dump stops at 2 KiB: --json has them all).
    static func payload(_ m: WebSocketMessageRecord, _ data: Data?, raw: Bool = false, limit: Int = .max) -> [String] {
        guard let data else { return ["  (its bytes are not in bodies/ now: still being written, or lost)"] }
        if m.opcode == .text, let text = String(validating: data.prefix(limit), as: UTF8.self) ?? String(validating: data, as: UTF8.self) {
            let shown = !raw && data.count <= limit ? JSONView.pretty(text) ?? text : text
            var lines = shown.split(separator: "\n", omittingEmptySubsequences: false).map { "  \($0)" }
            if data.count > limit { lines.append("  (\(data.count - limit) more bytes: --json has them all)") }
            return lines
        }
        let dumped = min(limit, Self.hexDumpLimit)
        var lines = HexDump.lines(data.prefix(dumped)).map { "  \($0)" }
        if data.count > dumped { lines.append("  (\(data.count - dumped) more bytes: --json has them all)") }
        return lines
    }

    static let hexDumpLimit = 2048
}
