/// One HTTP/1 message as text a person can edit: the start line, the
/// headers and the body as bytes. Breakpoints show held messages this way
/// and take edited ones back. Bodies are whole (never chunked), so a
/// message is framed by `Content-Length` alone and edits are re-framed.
public struct RawHTTPMessage: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case request, response
    }

    public enum StartLine: Sendable, Equatable {
        case request(method: String, target: String, version: String)
        case response(version: String, status: Int, reason: String)
    }

    public var start: StartLine
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(start: StartLine, headers: [(name: String, value: String)], body: [UInt8]) {
        self.start = start
        self.headers = headers
        self.body = body
    }

    public static func == (a: RawHTTPMessage, b: RawHTTPMessage) -> Bool {
        a.start == b.start && a.body == b.body && a.headers.map { [$0.name, $0.value] } == b.headers.map { [$0.name, $0.value] }
    }

    public var kind: Kind {
        if case .request = start { return .request }
        return .response
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// Parses an edited message. Lines may end in CRLF or a bare LF (what
    /// an editor saves); everything after the blank line is the body.
    public static func parse(_ bytes: [UInt8], as kind: Kind) throws(ParseError) -> RawHTTPMessage {
        // No blank line: all head, no body.
        let (headEnd, bodyStart) = headBoundary(bytes) ?? (bytes.last == UInt8(ascii: "\n") ? bytes.count - 1 : bytes.count, bytes.count)
        var lines = bytes[..<headEnd].split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            line -> ArraySlice<UInt8> in
            line.last == UInt8(ascii: "\r") ? line.dropLast() : line
        }
        guard !lines.isEmpty, let first = String(validating: lines.removeFirst(), as: UTF8.self) else {
            throw ParseError("the start line is not UTF-8 text")
        }
        let start = try startLine(first, kind: kind)
        var headers: [(name: String, value: String)] = []
        for (index, line) in lines.enumerated() {
            let number = index + 2
            guard let text = String(validating: line, as: UTF8.self) else {
                throw ParseError("line \(number): a header that is not UTF-8 text")
            }
            if text.first == " " || text.first == "\t" { throw ParseError("line \(number): folded header lines are not allowed") }
            guard let colon = text.firstIndex(of: ":") else {
                throw ParseError("line \(number): \"\(text)\" is not \"Name: value\" (an empty line goes between the headers and the body)")
            }
            let name = String(text[..<colon])
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else {
                throw ParseError("line \(number): \"\(name)\" is not a valid header name")
            }
            let value = text[text.index(after: colon)...].trimmingSpaces
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
                throw ParseError("line \(number): the value of \(name) holds control characters")
            }
            headers.append((name, value))
        }
        return RawHTTPMessage(start: start, headers: headers, body: Array(bytes[bodyStart...]))
    }

    /// The bytes `parse` reads back: CRLF line ends.
    public func rendered() -> [UInt8] {
        var text: String
        switch start {
        case let .request(method, target, version): text = "\(method) \(target) \(version)\r\n"
        case let .response(version, status, reason): text = "\(version) \(status)\(reason.isEmpty ? "" : " \(reason)")\r\n"
        }
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// A 204 or 304 response: never a body.
    public var isBodylessStatus: Bool {
        if case let .response(_, status, _) = start { return status == 204 || status == 304 }
        return false
    }

    public func values(_ name: String) -> [String] {
        headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
    }

    /// Frames the body by `Content-Length`: a whole body is never chunked.
    /// `bodyless`: a response to HEAD, a 204 or a 304, whose length header
    /// describes a body that is not sent; it keeps its headers and no body.
    public mutating func frame(bodyless: Bool) {
        if bodyless {
            body = []
            return
        }
        let isFraming = { (header: (name: String, value: String)) in
            let name = header.name.lowercased()
            return name == "content-length" || name == "transfer-encoding"
        }
        let position = headers.firstIndex(where: isFraming)
        headers.removeAll(where: isFraming)
        guard position != nil || !body.isEmpty || kind == .response else { return }
        headers.insert(("Content-Length", "\(body.count)"), at: min(position ?? headers.count, headers.count))
    }

    /// Whether this can stand in for `original` at a breakpoint: a final
    /// response (no 1xx), and a request target of the same form (a tunnel's
    /// requests are origin-form; the explicit proxy's name their host).
    public func checkEditable(replacing original: RawHTTPMessage) throws(ParseError) {
        switch (start, original.start) {
        case let (.response(_, status, reason), .response):
            guard status >= 200 else {
                throw ParseError("line 1: a held response can only become a final one (200 or above), not \(status)")
            }
            // It goes to the client as it is. (Held ones are not checked: a
            // server may send anything but a line break there.)
            guard !reason.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
                throw ParseError("line 1: the reason phrase holds control characters")
            }
        case let (.request(_, target, _), .request(_, was, _)):
            let absolute = was.lowercased().hasPrefix("http://")
            if absolute && !target.lowercased().hasPrefix("http://") {
                throw ParseError("line 1: the target must stay an absolute http:// URL, as the client sent it (was \(was))")
            }
            if !absolute && !target.hasPrefix("/") && target != "*" {
                throw ParseError(
                    "line 1: the target must stay a path starting with / (was \(was)): the connection's host decides where it goes")
            }
        default:
            throw ParseError("line 1: a held \(original.kind.rawValue) must stay a \(original.kind.rawValue)")
        }
    }

    private static func startLine(_ line: String, kind: Kind) throws(ParseError) -> StartLine {
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        switch kind {
        case .request:
            guard parts.count == 3, !parts[0].isEmpty, parts[0].unicodeScalars.allSatisfy(isTokenCharacter), !parts[1].isEmpty,
                !parts[1].contains(" ")
            else {
                throw ParseError("line 1: \"\(line)\" is not a request line (METHOD target HTTP/1.1)")
            }
            guard isVersion(parts[2]) else { throw ParseError("line 1: \"\(parts[2])\" is not HTTP/1.0 or HTTP/1.1") }
            // It goes on the wire as it is: no control characters, no tabs.
            guard !parts[1].unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw ParseError("line 1: the target holds control characters")
            }
            return .request(method: parts[0], target: parts[1], version: parts[2])
        case .response:
            guard parts.count >= 2, isVersion(parts[0]) else {
                throw ParseError("line 1: \"\(line)\" is not a status line (HTTP/1.1 200 OK)")
            }
            guard parts[1].count == 3, let status = Int(parts[1]), (100...999).contains(status) else {
                throw ParseError("line 1: \"\(parts[1])\" is not a three-digit status code")
            }
            return .response(version: parts[0], status: status, reason: parts.count == 3 ? parts[2] : "")
        }
    }

    private static func isVersion(_ text: String) -> Bool { text == "HTTP/1.1" || text == "HTTP/1.0" }

    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": return true
        default: return "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar)
        }
    }

    /// Where the head ends and the body starts: the first empty line.
    private static func headBoundary(_ bytes: [UInt8]) -> (Int, Int)? {
        var index = 0
        while let newline = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            let next = newline + 1
            if next < bytes.count, bytes[next] == UInt8(ascii: "\n") { return (newline, next + 1) }
            if next + 1 < bytes.count, bytes[next] == UInt8(ascii: "\r"), bytes[next + 1] == UInt8(ascii: "\n") {
                return (newline, next + 2)
            }
            index = next
        }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(scalars[first...last])
    }
}
