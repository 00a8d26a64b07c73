import Foundation

/// An exchange's request as a runnable curl command (`busymate curl`, the
/// web page's "Copy as cURL").
public enum CurlCommandLine {
    public enum Payload: Sendable {
        case text(String)
        case file(String)
    }

    public static func command(for record: ExchangeRecord, payload: Payload?, proxy: (url: String, ca: String)? = nil) -> String {
        // -g: brackets and braces in a URL are not curl's globs.
        var parts = ["curl", "-g"]
        if record.method == "HEAD" {
            parts.append("--head")
        } else if record.method != "GET" || payload != nil {
            parts += ["-X", quote(record.method)]
        }
        if record.httpVersion == "HTTP/1.0" { parts.append("--http1.0") }
        // HTTP/2 as the client spoke it: over TLS by ALPN; in the clear only
        // with prior knowledge (an `Upgrade: h2c` is stripped, so stays HTTP/1.1).
        if record.httpVersion == "HTTP/2.0" || record.httpVersion == "HTTP/2" {
            parts.append(record.scheme == "http" ? "--http2-prior-knowledge" : "--http2")
        }
        parts.append(quote(record.url))
        // Framing and hop-by-hop headers are curl's business.
        let skip: Set<String> = ["content-length", "transfer-encoding", "connection", "proxy-connection", "keep-alive", "host"]
        let headers = ExchangeRecord.decodeHeaders(record.requestHeaders)
        for (name, value) in headers where !skip.contains(name.lowercased()) {
            // `Name:` would remove the header in curl; `Name;` sends it empty.
            parts += ["-H", quote(value.isEmpty ? "\(name);" : "\(name): \(value)")]
        }
        // The client asked for compressed answers: curl decodes them too.
        let accepted = headers.filter { $0.0.lowercased() == "accept-encoding" }.map { $0.1.lowercased() }.joined(separator: ",")
        if ["gzip", "deflate", "br"].contains(where: { accepted.contains($0) }) {
            parts.append("--compressed")
        }
        switch payload {
        case let .text(text): parts += ["--data-binary", quote(text)]
        case let .file(path): parts += ["--data-binary", quote("@" + path)]
        case nil: break
        }
        if let proxy {
            parts += ["--proxy", quote(proxy.url)]
            if record.scheme == "https" { parts += ["--cacert", quote(proxy.ca)] }
        }
        return parts.joined(separator: " ")
    }

    /// The body as text a single-quoted shell argument carries exactly:
    /// UTF-8 with no NUL and no control character but tab and newlines; nil otherwise.
    public static func shellText(_ body: Data) -> String? {
        guard !body.contains(where: { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D) || $0 == 0x7F }),
            let text = String(validating: body, as: UTF8.self), !text.hasPrefix("@")
        else { return nil }
        return text
    }

    /// POSIX shell single quotes.
    public static func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
