import Foundation

/// A DNS row as `busymate dns --json` and the web page show it.
public enum DNSQueryJSON {
    public static func members(_ r: ExchangeRecord) -> [ExchangeJSON.Member] {
        let answers = r.responseBody.map { String(decoding: $0, as: UTF8.self).split(separator: "\n").map(String.init) } ?? []
        return [
            ("id", ExchangeJSON.number(r.id)), ("time", ExchangeJSON.date(r.startedAt)),
            ("client", ExchangeJSON.string(clientIP(r.clientAddress))),
            ("device", ExchangeJSON.string(r.device)), ("name", ExchangeJSON.string(r.host)),
            ("type", ExchangeJSON.string(String(r.path.dropFirst()))),
            ("rcode", ExchangeJSON.string(r.reason)), ("answers", ExchangeJSON.array(answers.map { ExchangeJSON.string($0) })),
            ("latency_ms", ExchangeJSON.number(r.durationMilliseconds)), ("transport", ExchangeJSON.string(r.httpVersion)),
            ("server", ExchangeJSON.string(r.serverAddress)), ("error", ExchangeJSON.string(r.error)),
        ]
    }

    /// `10.0.0.2` of `10.0.0.2:5353`, `fd00::2` of `[fd00::2]:5353`.
    public static func clientIP(_ address: String?) -> String? {
        guard let address else { return nil }
        if address.hasPrefix("["), let close = address.firstIndex(of: "]") {
            return String(address[address.index(after: address.startIndex)..<close])
        }
        return address.split(separator: ":").first.map(String.init)
    }
}
