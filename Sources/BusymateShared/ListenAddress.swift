/// One `"host:port"` entry of `proxy.listen`. IPv6 hosts are bracketed.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Whether only this machine can connect (127.0.0.0/8, ::1).
    public var isLoopback: Bool { host.hasPrefix("127.") || host == "::1" }

    /// Whether it is bound on every address (0.0.0.0, ::).
    public var isWildcard: Bool { host == "0.0.0.0" || host == "::" }

    public init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, !portText.isEmpty, portText.allSatisfy(\.isNumber),
            let port = Int(portText), (0...65535).contains(port)
        else { return nil }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
