import Foundation
import Logging

/// All of Busymate's settings, read from the group's `settings.json`.
/// Decoding validates every value and names the line and column of the
/// first bad one; keys this version does not know are kept in the document.
public struct AppSettings: Sendable, Equatable {
    public enum Mode: String, Sendable, CaseIterable { case proxy, transparent }

    public var mode: Mode = .proxy
    public var logLevel: Logger.Level = .info
    public var listen: [ListenAddress] = [ListenAddress(host: "127.0.0.1", port: 9090)]
    /// `proxy.http2`: HTTP/2 is offered to clients (ALPN, h2c prior
    /// knowledge) and to origins; off, both legs speak HTTP/1.1.
    public var http2 = true
    public var sslInclude: [String] = []
    public var sslExclude: [String] = []
    /// Hosts whose upstream certificate is not verified.
    public var insecureUpstream: [String] = []
    /// A PEM bundle trusted for upstream servers besides the system store.
    public var upstreamTrust: String?
    /// Pass a host through once a client that trusts our CA refuses our
    /// certificate for it (certificate pinning), for `pinTTL` seconds.
    public var autoPin = true
    public var pinTTL: Double = 86_400
    /// Whether clients on loopback may pin a host: off, since every local
    /// process shares 127.0.0.1 and one's trust says nothing of another's.
    public var pinLoopback = false
    /// How long a replaced tunnel may finish requests in flight.
    public var drainSeconds: Double = 5
    /// Retention: the oldest exchanges go beyond this many.
    public var maxExchanges = 100_000
    /// Retention: the oldest exchanges go while their bodies exceed this.
    public var maxBytes = 1 << 30
    /// Retention of DNS rows, apart: a DNS flood never evicts exchanges.
    public var maxDNSRows = 10_000
    /// What is stored of one body (never what is forwarded).
    public var bodyMax = 64 << 20
    /// In order; the first enabled match of each kind applies.
    public var rules: [Rule] = []
    public var breakpoints = BreakpointSettings()
    /// Every upstream dial goes through it, but for `bypass` hosts.
    public var upstreamProxy: UpstreamProxySetting?
    public var timeouts = Timeouts()
    /// Where the web page is served (`web.listen`); the supervisor binds it.
    public var webListen = ListenAddress(host: "127.0.0.1", port: 9091)
    public var transparent = Transparent()
    public var dns = DNS()
    /// The onboarding pages (`onboarding.listen`); off by default.
    public var onboardingListen: ListenAddress?
    public var devices = Devices()
    public var access = Access()
    /// `grpc.descriptor_sets`: FileDescriptorSet files (absolute, or
    /// relative to the group directory) the readers name fields from.
    public var grpcDescriptorSets: [String] = []

    public init() {}

    public var sslProxying: SSLProxyMatcher { SSLProxyMatcher(include: sslInclude, exclude: sslExclude) }
    public var insecureUpstreamMatcher: SSLProxyMatcher { SSLProxyMatcher(include: insecureUpstream, exclude: []) }

    /// The document a new group directory starts with.
    public static let defaultDocument = """
        {
          "mode": "proxy",
          "log_level": "info",
          "proxy": {
            "listen": ["127.0.0.1:9090"]
          },
          "ssl_proxying": {
            "include": [],
            "exclude": []
          },
          "tunnel": {
            "drain_seconds": 5
          },
          "web": {
            "listen": "127.0.0.1:9091"
          }
        }

        """
}

public struct SettingsError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public var position: SourcePosition?
    public var keyPath: String?
    /// Set when the error is a key that is not read there (a misspelling):
    /// the web API refuses such a write as a bad request, naming the key.
    public var unknownKey: String?

    public init(message: String, position: SourcePosition?, keyPath: String? = nil) {
        self.message = message
        self.position = position
        self.keyPath = keyPath
    }

    /// `3:14: proxy.listen[0]: "nine" is not host:port`
    public var description: String {
        var parts: [String] = []
        if let position { parts.append(position.description) }
        if let keyPath { parts.append(keyPath) }
        parts.append(message)
        return parts.joined(separator: ": ")
    }
}

extension AppSettings {
    public static let knownKeys: [String: Set<String>] = [
        "": [
            "mode", "log_level", "proxy", "ssl_proxying", "tunnel", "capture", "rules", "breakpoints", "upstream_proxy", "timeouts", "web",
            "transparent", "dns", "onboarding", "devices", "access", "grpc",
        ],
        "grpc": ["descriptor_sets"],
        "web": ["listen"],
        "transparent": networkKeys["transparent"] ?? [],
        "dns": networkKeys["dns"] ?? [],
        "onboarding": networkKeys["onboarding"] ?? [],
        "devices": networkKeys["devices"] ?? [],
        "devices.list[]": ["name", "port", "address", "enrolment"],
        "devices.list[].enrolment": ["token_sha256", "expires", "revoked", "redeemed_by", "redeemed_at"],
        "access": networkKeys["access"] ?? [],
        "access.grants[]": ["address", "until"],
        "timeouts": Set(Timeouts.keys),
        "breakpoints": ["request", "response", "messages_from_client", "messages_from_server", "timeout_seconds"],
        "upstream_proxy": ["scheme", "host", "port", "username", "password", "bypass"],
        "capture": ["max_exchanges", "max_bytes", "body_max", "max_dns_rows"],
        "proxy": ["listen", "http2"],
        "ssl_proxying": ["include", "exclude", "insecure_upstream", "upstream_trust", "auto_pin", "pin_ttl", "pin_loopback"],
        "tunnel": ["drain_seconds"],
    ]

    /// Keys that once chose what the root supervisor does with privileges.
    /// The file is group-writable, so they are ignored (kept in the file,
    /// listed as unknown) and each gets a warning that says where the
    /// setting lives now.
    public static let rootOnlyKeys: [String: String] = [
        "tunnel.user":
            "whom the tunnel runs as is busymate-app's --tunnel-user option (the unit's command line), which only root can change",
        "tunnel.group": "the tunnel's group is busymate-app's --tunnel-group option (the unit's command line), which only root can change",
    ]

    /// Parses and validates `text`; the error names line and column.
    public static func decode(_ text: String) throws(SettingsError) -> (settings: AppSettings, unknownKeys: [String]) {
        let root: JSONNode
        do {
            root = try JSONParser.parse(text)
        } catch {
            throw SettingsError(message: error.message, position: error.position)
        }
        return try decode(root)
    }

    /// Seconds from a number or "30m", "24h", "7d" (as settings durations read).
    public static func duration(_ text: String, path: String) throws(SettingsError) -> Double {
        try Reader().duration(JSONNode(.string(text)), path: path)
    }

    public static func decode(_ root: JSONNode) throws(SettingsError) -> (settings: AppSettings, unknownKeys: [String]) {
        var reader = Reader()
        let settings = try reader.read(root)
        return (settings, reader.unknownKeys)
    }

    struct Reader {
        var unknownKeys: [String] = []

        mutating func read(_ root: JSONNode) throws(SettingsError) -> AppSettings {
            var s = AppSettings()
            try object(root, path: "")
            if let node = root["mode"] {
                let text = try string(node, path: "mode")
                guard let mode = Mode(rawValue: text) else {
                    throw SettingsError(
                        message: "\"\(text)\" is not a mode; use \(Mode.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))",
                        position: node.position, keyPath: "mode")
                }
                s.mode = mode
            }
            if let node = root["log_level"] {
                let text = try string(node, path: "log_level")
                guard let level = Logger.Level(rawValue: text) else {
                    throw SettingsError(
                        message:
                            "\"\(text)\" is not a log level; use one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))",
                        position: node.position, keyPath: "log_level")
                }
                s.logLevel = level
            }
            if let proxy = root["proxy"] {
                try object(proxy, path: "proxy")
                if let node = proxy["listen"] {
                    let items = try strings(node, path: "proxy.listen")
                    var seen = Set<ListenAddress>()
                    s.listen = []
                    for (i, item) in items.enumerated() {
                        guard let address = ListenAddress(item.text), IPAddressText.isLiteral(address.host) else {
                            throw SettingsError(
                                message:
                                    "\"\(item.text)\" is not \"address:port\" with an IP address (e.g. \"127.0.0.1:9090\" or \"[::1]:9090\")",
                                position: item.position, keyPath: "proxy.listen[\(i)]")
                        }
                        guard seen.insert(address).inserted else {
                            throw SettingsError(
                                message: "\"\(item.text)\" is listed twice", position: item.position, keyPath: "proxy.listen[\(i)]")
                        }
                        s.listen.append(address)
                    }
                    if s.listen.isEmpty {
                        throw SettingsError(message: "needs at least one address", position: node.position, keyPath: "proxy.listen")
                    }
                }
                if let node = proxy["http2"] {
                    guard case let .bool(on) = node.value else {
                        throw SettingsError(
                            message: "expected true or false, found \(node.value.typeName)", position: node.position, keyPath: "proxy.http2"
                        )
                    }
                    s.http2 = on
                }
            }
            if let ssl = root["ssl_proxying"] {
                try object(ssl, path: "ssl_proxying")
                if let node = ssl["include"] { s.sslInclude = try patterns(node, path: "ssl_proxying.include") }
                if let node = ssl["exclude"] { s.sslExclude = try patterns(node, path: "ssl_proxying.exclude") }
                if let node = ssl["insecure_upstream"] { s.insecureUpstream = try patterns(node, path: "ssl_proxying.insecure_upstream") }
                if let node = ssl["auto_pin"] {
                    guard case let .bool(on) = node.value else {
                        throw SettingsError(
                            message: "expected true or false, found \(node.value.typeName)", position: node.position,
                            keyPath: "ssl_proxying.auto_pin")
                    }
                    s.autoPin = on
                }
                if let node = ssl["pin_loopback"] {
                    guard case let .bool(on) = node.value else {
                        throw SettingsError(
                            message: "expected true or false, found \(node.value.typeName)", position: node.position,
                            keyPath: "ssl_proxying.pin_loopback")
                    }
                    s.pinLoopback = on
                }
                if let node = ssl["pin_ttl"] { s.pinTTL = try duration(node, path: "ssl_proxying.pin_ttl") }
                if let node = ssl["upstream_trust"], node.value != .null {
                    let path = try string(node, path: "ssl_proxying.upstream_trust")
                    guard path.hasPrefix("/") else {
                        throw SettingsError(
                            message: "\"\(path)\" must be an absolute path to a PEM file", position: node.position,
                            keyPath: "ssl_proxying.upstream_trust")
                    }
                    s.upstreamTrust = path
                }
            }
            if let tunnel = root["tunnel"] {
                try object(tunnel, path: "tunnel")
                if let node = tunnel["drain_seconds"] {
                    let value = try number(node, path: "tunnel.drain_seconds")
                    guard (0...300).contains(value) else {
                        throw SettingsError(message: "must be between 0 and 300", position: node.position, keyPath: "tunnel.drain_seconds")
                    }
                    s.drainSeconds = value
                }
            }
            if let timeouts = root["timeouts"] {
                try object(timeouts, path: "timeouts")
                func seconds(_ key: String, _ keyPath: WritableKeyPath<Timeouts, Double>) throws(SettingsError) {
                    guard let node = timeouts[key] else { return }
                    let value = try number(node, path: "timeouts.\(key)")
                    guard value >= 0.1, value <= 86_400 else {
                        throw SettingsError(
                            message: "must be between 0.1 and 86400 seconds", position: node.position, keyPath: "timeouts.\(key)")
                    }
                    s.timeouts[keyPath: keyPath] = value
                }
                try seconds("request_head_seconds", \.requestHead)
                try seconds("idle_seconds", \.idle)
                try seconds("body_seconds", \.bodyProgress)
                try seconds("tls_handshake_seconds", \.tlsHandshake)
                try seconds("upstream_response_seconds", \.upstreamResponse)
                try seconds("tunnel_idle_seconds", \.tunnelIdle)
            }
            s.timeouts.drainIdleWait = max(1, s.drainSeconds - 0.5)
            if let capture = root["capture"] {
                try object(capture, path: "capture")
                func rows(_ key: String) throws(SettingsError) -> Int? {
                    guard let node = capture[key] else { return nil }
                    let value = try number(node, path: "capture.\(key)")
                    guard value >= 1, value <= 100_000_000, value == value.rounded() else {
                        throw SettingsError(
                            message: "must be a whole number from 1 to 100000000", position: node.position, keyPath: "capture.\(key)")
                    }
                    return Int(value)
                }
                if let value = try rows("max_exchanges") { s.maxExchanges = value }
                if let value = try rows("max_dns_rows") { s.maxDNSRows = value }
                if let node = capture["max_bytes"] { s.maxBytes = try byteCount(node, path: "capture.max_bytes", minimum: 1 << 20) }
                if let node = capture["body_max"] { s.bodyMax = try byteCount(node, path: "capture.body_max", minimum: 0) }
            }
            if let node = root["rules"] { s.rules = try rules(node) }
            if let node = root["breakpoints"] { s.breakpoints = try breakpoints(node) }
            if let node = root["upstream_proxy"], node.value != .null { s.upstreamProxy = try upstreamProxy(node) }
            if let web = root["web"] {
                try object(web, path: "web")
                if let node = web["listen"] {
                    let text = try string(node, path: "web.listen")
                    guard let address = ListenAddress(text), IPAddressText.isLiteral(address.host) else {
                        throw SettingsError(
                            message: "\"\(text)\" is not \"address:port\" with an IP address (e.g. \"127.0.0.1:9091\")",
                            position: node.position, keyPath: "web.listen")
                    }
                    s.webListen = address
                }
            }
            try readNetwork(root, into: &s)
            try readGRPC(root, into: &s)
            return s
        }

        mutating func object(_ node: JSONNode, path: String) throws(SettingsError) {
            guard case let .object(members) = node.value else {
                throw SettingsError(
                    message: "expected an object, found \(node.value.typeName)", position: node.position, keyPath: path.isEmpty ? nil : path
                )
            }
            let known = AppSettings.knownKeys[path] ?? []
            for member in members where !known.contains(member.key) {
                unknownKeys.append(path.isEmpty ? member.key : "\(path).\(member.key)")
            }
        }

        func string(_ node: JSONNode, path: String) throws(SettingsError) -> String {
            guard case let .string(text) = node.value else {
                throw SettingsError(message: "expected a string, found \(node.value.typeName)", position: node.position, keyPath: path)
            }
            return text
        }

        func number(_ node: JSONNode, path: String) throws(SettingsError) -> Double {
            guard case let .number(text) = node.value, let value = Double(text) else {
                throw SettingsError(message: "expected a number, found \(node.value.typeName)", position: node.position, keyPath: path)
            }
            return value
        }

        /// Seconds as a number, or a string with a unit: "30s", "10m", "24h", "7d".
        func duration(_ node: JSONNode, path: String) throws(SettingsError) -> Double {
            var seconds: Double?
            switch node.value {
            case let .number(text): seconds = Double(text)
            case let .string(text):
                let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
                if let unit = text.last.flatMap({ units[$0] }) { seconds = Double(text.dropLast()).map { $0 * unit } }
            default: break
            }
            guard let seconds, seconds > 0, seconds <= 366 * 86_400 else {
                throw SettingsError(
                    message: "must be a duration from 1 second to 366 days: seconds, or \"30m\", \"24h\", \"7d\"", position: node.position,
                    keyPath: path)
            }
            return seconds
        }

        /// Bytes as a whole number or a string with a unit: 1048576, "512KiB", "64MiB", "2GiB" (K/M/G are 1024s too).
        func byteCount(_ node: JSONNode, path: String, minimum: Int) throws(SettingsError) -> Int {
            let value: Double
            switch node.value {
            case let .number(text):
                value = Double(text) ?? -1
            case let .string(text):
                let trimmed = text.trimmingCharacters(in: .whitespaces)
                let (k, m, g): (Double, Double, Double) = (1024, 1024 * 1024, 1024 * 1024 * 1024)
                let units: [(String, Double)] = [
                    ("GiB", g), ("MiB", m), ("KiB", k), ("GB", g), ("MB", m), ("KB", k), ("G", g), ("M", m), ("K", k), ("B", 1),
                ]
                let unit = units.first { trimmed.uppercased().hasSuffix($0.0.uppercased()) } ?? ("", 1)
                let digits = trimmed.dropLast(unit.0.count).trimmingCharacters(in: .whitespaces)
                value = (Double(digits) ?? -1) * unit.1
            default:
                throw SettingsError(
                    message: "expected a size (bytes, or a string such as \"64MiB\"), found \(node.value.typeName)",
                    position: node.position, keyPath: path)
            }
            guard value >= Double(minimum), value <= 1_125_899_906_842_624, value == value.rounded() else {
                throw SettingsError(
                    message: "must be a whole number of bytes of at least \(minimum), or a size such as \"64MiB\"", position: node.position,
                    keyPath: path)
            }
            return Int(value)
        }

        func strings(_ node: JSONNode, path: String) throws(SettingsError) -> [(text: String, position: SourcePosition)] {
            guard case let .array(elements) = node.value else {
                throw SettingsError(
                    message: "expected an array of strings, found \(node.value.typeName)", position: node.position, keyPath: path)
            }
            var out: [(String, SourcePosition)] = []
            for (i, element) in elements.enumerated() {
                out.append((try string(element, path: "\(path)[\(i)]"), element.position))
            }
            return out
        }

        func patterns(_ node: JSONNode, path: String) throws(SettingsError) -> [String] {
            var out: [String] = []
            for (i, item) in try strings(node, path: path).enumerated() {
                if let problem = SSLProxyMatcher.problem(with: item.text) {
                    throw SettingsError(message: "\"\(item.text)\": \(problem)", position: item.position, keyPath: "\(path)[\(i)]")
                }
                out.append(item.text)
            }
            return out
        }
    }
}
