import Foundation

/// A curl command line as a request (Proxyman's "Import cURL", the seed's
/// CURLParser): what a browser's "Copy as cURL", `busymate curl` or a
/// terminal gives. Only options that say what the request is are taken;
/// transport options that change nothing in it are passed over; any other
/// option is refused by its name rather than silently dropped.
public enum CurlImport {
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Options that take no value and do not change the request.
    static let ignoredFlags: Set<String> = [
        "-s", "--silent", "-S", "--show-error", "-v", "--verbose", "-k", "--insecure", "-L", "--location", "-i", "--include",
        "-g", "--globoff", "-f", "--fail", "-N", "--no-buffer", "--http1.1", "--http2", "--http2-prior-knowledge", "--http1.0",
        "--tlsv1", "--tlsv1.2", "--tlsv1.3", "-#", "--progress-bar", "--no-progress-meter", "--fail-with-body", "--location-trusted",
    ]
    /// Options whose value does not change the request (where output
    /// goes, how long to wait, which proxy: Busymate sends it).
    static let ignoredWithValue: Set<String> = [
        "-o", "--output", "-m", "--max-time", "--connect-timeout", "--retry", "-x", "--proxy", "--cacert", "--capath", "-w", "--write-out",
        "--proxy-cacert", "-D", "--dump-header",
    ]
    /// Options that take a value (so `-XPOST` and `--request=POST` parse).
    static let withValue: Set<String> = Set([
        "-X", "--request", "-H", "--header", "-d", "--data", "--data-raw", "--data-ascii", "--data-binary", "--data-urlencode", "-b",
        "--cookie",
        "-A", "--user-agent", "-e", "--referer", "-u", "--user", "--url",
    ]).union(ignoredWithValue)
    static let otherFlags: Set<String> = ["-I", "--head", "-G", "--get", "--compressed"]

    public static var supported: String {
        "-X -H -d --data-raw --data-binary --data-urlencode -b -A -e -u -I -G --url --compressed"
    }

    public static func parse(_ command: String) throws(Refusal) -> OutgoingRequest {
        let words = try shellWords(command)
        guard let first = words.first, first == "curl" || first.hasSuffix("/curl") else {
            throw Refusal(description: "not a curl command: it must start with curl")
        }
        var method: String?
        var url: String?
        var headers: [(String, String)] = []
        /// `-H 'Name:'`: a header curl would add, removed.
        var removed: Set<String> = []
        var data: [String] = []
        var head = false, get = false, compressed = false

        func option(_ word: String, _ value: String?) throws(Refusal) {
            switch word {
            case "-X", "--request": method = value
            case "-H", "--header":
                let text = value ?? ""
                if text.hasSuffix(";"), !text.contains(":") {
                    headers.append((String(text.dropLast()).trimmingCharacters(in: .whitespaces), ""))
                } else {
                    guard let colon = text.firstIndex(of: ":") else {
                        throw Refusal(description: "curl -H \(text): write it as 'Name: value'")
                    }
                    let name = text[..<colon].trimmingCharacters(in: .whitespaces)
                    let v = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                    if v.isEmpty { removed.insert(name.lowercased()) } else { headers.append((name, v)) }
                }
            case "-d", "--data", "--data-ascii", "--data-binary", "--data-raw":
                let text = value ?? ""
                if text.hasPrefix("@"), word != "--data-raw" {
                    throw Refusal(description: "curl \(word) \(text) reads a file: paste the body itself (--data-raw), or use --body-file")
                }
                // A value given in place is sent as it is (curl strips line breaks only from a file's).
                data.append(text)
            case "--data-urlencode": data.append(try urlencoded(value ?? ""))
            case "-b", "--cookie":
                let text = value ?? ""
                guard text.contains("=") else {
                    throw Refusal(description: "curl \(word) \(text) names a cookie file: paste the cookies ('name=value; …')")
                }
                headers.append(("Cookie", text))
            case "-A", "--user-agent": headers.append(("User-Agent", value ?? ""))
            case "-e", "--referer": headers.append(("Referer", value ?? ""))
            case "-u", "--user": headers.append(("Authorization", "Basic " + Data((value ?? "").utf8).base64EncodedString()))
            case "--url": url = try one(url, value ?? "")
            case "-I", "--head": head = true
            case "-G", "--get": get = true
            case "--compressed": compressed = true
            default:
                if ignoredFlags.contains(word) || ignoredWithValue.contains(word) { return }
                throw Refusal(description: "curl option \(word) is not one the import takes (it takes \(supported))")
            }
        }

        var i = 1
        var endOfOptions = false
        while i < words.count {
            let word = words[i]
            i += 1
            if !endOfOptions, word == "--" {
                endOfOptions = true
                continue
            }
            guard !endOfOptions, word.hasPrefix("-"), word.count > 1 else {
                url = try one(url, word)
                continue
            }
            if word.hasPrefix("--") {
                var name = word
                var value: String?
                if let eq = word.firstIndex(of: "=") {
                    value = String(word[word.index(after: eq)...])
                    name = String(word[..<eq])
                }
                if withValue.contains(name), value == nil {
                    guard i < words.count else { throw Refusal(description: "curl option \(name) needs a value") }
                    value = words[i]
                    i += 1
                }
                try option(name, value)
                continue
            }
            // Short options, as curl reads them: `-sSL`, `-XPOST`, `-sX POST`, `-fsSLo out`.
            var rest = Substring(word.dropFirst())
            while let c = rest.first {
                rest = rest.dropFirst()
                let flag = "-\(c)"
                if withValue.contains(flag) {
                    var value = String(rest)
                    if value.isEmpty {
                        guard i < words.count else { throw Refusal(description: "curl option \(flag) needs a value") }
                        value = words[i]
                        i += 1
                    }
                    try option(flag, value)
                    break
                }
                guard ignoredFlags.contains(flag) || otherFlags.contains(flag) else {
                    throw Refusal(
                        description:
                            "curl option \(flag)\(word.count > 2 ? " (in \(word))" : "") is not one the import takes (it takes \(supported))"
                    )
                }
                try option(flag, nil)
            }
        }
        if head, !data.isEmpty, !get { throw Refusal(description: "curl -I with -d: curl itself refuses two methods at once") }
        guard var target = url, !target.isEmpty else { throw Refusal(description: "the curl command has no URL") }
        if !target.contains("://") { target = "http://" + target }
        guard OutgoingRequest.isAbsoluteHTTP(target) else {
            throw Refusal(description: "\(target): only http:// and https:// URLs are imported")
        }
        var body = Data()
        if !data.isEmpty {
            let joined = data.joined(separator: "&")
            if get {
                target += (target.contains("?") ? "&" : "?") + joined
            } else {
                body = Data(joined.utf8)
                if !removed.contains("content-type"),
                    !headers.contains(where: { $0.0.caseInsensitiveCompare("Content-Type") == .orderedSame })
                {
                    headers.append(("Content-Type", "application/x-www-form-urlencoded"))
                }
            }
        }
        if compressed, !removed.contains("accept-encoding"),
            !headers.contains(where: { $0.0.caseInsensitiveCompare("Accept-Encoding") == .orderedSame })
        {
            headers.append(("Accept-Encoding", "deflate, gzip, br, zstd"))
        }
        if !removed.contains("accept"), !headers.contains(where: { $0.0.caseInsensitiveCompare("Accept") == .orderedSame }) {
            headers.insert(("Accept", "*/*"), at: 0)
        }
        let verb = method ?? (head ? "HEAD" : (!data.isEmpty && !get ? "POST" : "GET"))
        guard !verb.isEmpty, verb.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "-") }) else {
            throw Refusal(description: "curl -X \(verb): not a method name")
        }
        for (name, value) in headers {
            guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_!#$%&'*+.^`|~".contains($0)) }) else {
                throw Refusal(description: "curl -H: \"\(name)\" is not a header name")
            }
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw Refusal(description: "curl -H \(name): the value holds a line break")
            }
        }
        // Framing is computed from the body as sent.
        let framing: Set<String> = ["content-length", "transfer-encoding"]
        return OutgoingRequest(
            method: verb.uppercased(), url: target, headers: headers.filter { !framing.contains($0.0.lowercased()) }, body: body)
    }

    private static func one(_ current: String?, _ next: String) throws(Refusal) -> String {
        guard current == nil else {
            throw Refusal(description: "the curl command has two URLs (\(current ?? "") and \(next)): the import takes one request")
        }
        return next
    }

    /// `--data-urlencode`: `content`, `=content`, `name=content`, encoded
    /// as curl does (unreserved characters kept, a space as `+`); the forms
    /// that read a file (`@file`, `name@file`) are refused.
    static func urlencoded(_ value: String) throws(Refusal) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        let encode = { (s: Substring) in
            (s.addingPercentEncoding(withAllowedCharacters: allowed) ?? String(s)).replacingOccurrences(of: "%20", with: "+")
        }
        guard let mark = value.firstIndex(where: { $0 == "@" || $0 == "=" }) else { return encode(value[...]) }
        guard value[mark] == "=" else {
            throw Refusal(description: "curl --data-urlencode \(value) reads a file: paste the value itself (name=value)")
        }
        let name = value[..<mark]
        let content = encode(value[value.index(after: mark)...])
        return name.isEmpty ? content : "\(name)=\(content)"
    }

    /// The words a POSIX shell would pass: '…', "…" (with \\ \" \$ \`),
    /// $'…' (bash's, as Chrome copies bodies), backslash escapes and
    /// line continuations.
    static func shellWords(_ text: String) throws(Refusal) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        let chars = Array(text.unicodeScalars)
        var i = 0
        func char(_ j: Int) -> Unicode.Scalar? { j < chars.count ? chars[j] : nil }
        while i < chars.count {
            let c = chars[i]
            switch c {
            case " ", "\t", "\n", "\r":
                if inWord {
                    words.append(current)
                    current = ""
                    inWord = false
                }
                i += 1
            case "\\":
                if char(i + 1) == "\n" {
                    i += 2
                    continue
                }
                if char(i + 1) == "\r", char(i + 2) == "\n" {
                    i += 3
                    continue
                }
                guard let next = char(i + 1) else { throw Refusal(description: "the command ends with a lone backslash") }
                current.unicodeScalars.append(next)
                inWord = true
                i += 2
            case "'":
                guard let end = chars[(i + 1)...].firstIndex(of: "'") else { throw Refusal(description: "a single quote is not closed") }
                current.unicodeScalars.append(contentsOf: chars[(i + 1)..<end])
                inWord = true
                i = end + 1
            case "\"":
                i += 1
                var closed = false
                while i < chars.count {
                    let d = chars[i]
                    if d == "\"" {
                        closed = true
                        i += 1
                        break
                    }
                    if d == "\\", let next = char(i + 1), "\\\"$`\n".unicodeScalars.contains(next) {
                        if next != "\n" { current.unicodeScalars.append(next) }
                        i += 2
                        continue
                    }
                    if d == "$" || d == "`" {
                        throw Refusal(
                            description:
                                "the command expands a shell variable or command (\(d) in double quotes): paste it with the values in place"
                        )
                    }
                    current.unicodeScalars.append(d)
                    i += 1
                }
                guard closed else { throw Refusal(description: "a double quote is not closed") }
                inWord = true
            case "$" where char(i + 1) == "'":
                // bash's ANSI-C quoting, as bytes (`\xc3\xa9` is é), then UTF-8.
                i += 2
                var bytes: [UInt8] = []
                var closed = false
                func octal(most: Int) -> UInt8 {
                    var value = 0, n = 0
                    while n < most, let d = char(i), ("0"..."7").contains(d) {
                        value = value * 8 + Int(d.value - 48)
                        i += 1
                        n += 1
                    }
                    return UInt8(truncatingIfNeeded: value)
                }
                while i < chars.count {
                    let d = chars[i]
                    if d == "'" {
                        closed = true
                        i += 1
                        break
                    }
                    guard d == "\\", let next = char(i + 1) else {
                        bytes += Array(String(d).utf8)
                        i += 1
                        continue
                    }
                    i += 2
                    switch next {
                    case "n": bytes.append(0x0A)
                    case "r": bytes.append(0x0D)
                    case "t": bytes.append(0x09)
                    case "a": bytes.append(0x07)
                    case "b": bytes.append(0x08)
                    case "e", "E": bytes.append(0x1B)
                    case "f": bytes.append(0x0C)
                    case "v": bytes.append(0x0B)
                    case "\\", "'", "\"", "?": bytes += Array(String(next).utf8)
                    case "0"..."7":
                        i -= 1
                        bytes.append(octal(most: 3))
                    case "x":
                        var hex = ""
                        while hex.count < 2, let h = char(i), h.properties.isASCIIHexDigit {
                            hex.unicodeScalars.append(h)
                            i += 1
                        }
                        guard let byte = UInt8(hex, radix: 16) else { throw Refusal(description: "a \\x escape in $'…' has no hex digits") }
                        bytes.append(byte)
                    case "u", "U":
                        var hex = ""
                        let most = next == "u" ? 4 : 8
                        while hex.count < most, let h = char(i), h.properties.isASCIIHexDigit {
                            hex.unicodeScalars.append(h)
                            i += 1
                        }
                        guard let code = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(code) else {
                            throw Refusal(description: "a \\\(next) escape in $'…' is not a character")
                        }
                        bytes += Array(String(scalar).utf8)
                    default:
                        throw Refusal(
                            description: "the escape \\\(next) in $'…' is not one the import reads: paste the value with it in place")
                    }
                }
                guard closed else { throw Refusal(description: "a $' quote is not closed") }
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw Refusal(description: "a $'…' value is not UTF-8 text: a binary body cannot be pasted (use --body-file)")
                }
                current += text
                inWord = true
            case "$", "`":
                throw Refusal(description: "the command expands a shell variable or command (\(c)): paste it with the values in place")
            case "|", ";", "&", "<", ">":
                throw Refusal(description: "the command has shell syntax (\(c)): paste the curl command alone")
            default:
                current.unicodeScalars.append(c)
                inWord = true
                i += 1
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
