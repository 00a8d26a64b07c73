import BusymateShared
import Foundation

/// The JSON of sockets and their messages, for `show --messages --json`,
/// `tail --messages --json` and the web API: a text message's payload as
/// `text`, anything else (binary, or text that is not UTF-8) as `base64`.
public enum WebSocketJSON {
    public static func socket(_ s: WebSocketRecord) -> JSONNode {
        ExchangeJSON.object([
            ("state", ExchangeJSON.string(s.isOpen ? "open" : "closed")), ("opened_at", ExchangeJSON.date(s.openedAt)),
            ("closed_at", ExchangeJSON.date(s.closedAt)), ("extensions", ExchangeJSON.string(s.extensions)),
            ("messages_up", ExchangeJSON.number(s.messagesUp)), ("messages_down", ExchangeJSON.number(s.messagesDown)),
            ("pings", ExchangeJSON.number(s.pings)), ("pongs", ExchangeJSON.number(s.pongs)),
            ("close_code", ExchangeJSON.number(s.closeCode)), ("close_reason", ExchangeJSON.string(s.closeReason)),
            ("closed_by", ExchangeJSON.string(s.closedBy)),
        ])
    }

    /// `payload`: the stored bytes (nil: not readable now, as while its file is written).
    /// `shownLimit`: at most this many bytes of the payload, and `cut` says whether it was cut (the web page's).
    public static func message(_ m: WebSocketMessageRecord, payload: Data?, exchangeID: Int64? = nil, shownLimit: Int? = nil) -> JSONNode {
        var payload = payload
        var members: [ExchangeJSON.Member] = []
        if let exchangeID { members.append(("exchange_id", ExchangeJSON.number(exchangeID))) }
        members += [
            ("seq", ExchangeJSON.number(m.seq)), ("at", ExchangeJSON.date(m.at)),
            ("from", ExchangeJSON.string(m.fromClient ? "client" : "server")),
            ("type", ExchangeJSON.string(m.opcode == .text ? "text" : "binary")), ("length", ExchangeJSON.number(m.length)),
            ("wire_length", ExchangeJSON.number(m.wireLength)), ("frames", ExchangeJSON.number(m.frames)),
            ("compressed", ExchangeJSON.bool(m.compressed)),
            ("origin", ExchangeJSON.string(m.origin.rawValue)), ("stored", ExchangeJSON.number(m.stored)),
            ("truncated", ExchangeJSON.bool(m.truncated)),
        ]
        if let limit = shownLimit {
            let cut = (payload?.count ?? 0) > limit
            if cut, let whole = payload, m.opcode == .text {
                // Cut at a character's start, so text stays text.
                var end = limit
                while end > 0, whole[whole.startIndex + end] & 0xC0 == 0x80 { end -= 1 }
                payload = whole.prefix(end)
            } else if cut {
                payload = payload?.prefix(limit)
            }
            members.append(("cut", ExchangeJSON.bool(cut)))
        }
        if let payload, m.opcode == .text, let text = String(validating: payload, as: UTF8.self) {
            members.append(("text", ExchangeJSON.string(text)))
        } else {
            members.append(("base64", ExchangeJSON.string(payload?.base64EncodedString())))
        }
        return ExchangeJSON.object(members)
    }
}
