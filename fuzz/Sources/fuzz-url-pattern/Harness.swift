// URL patterns (URLPattern: rules and breakpoints) and host patterns
// (SSLProxyMatcher: ssl_proxying, insecure_upstream, upstream_proxy's
// bypass). The input is a pattern, a newline, and a URL.
//
// Properties:
// - a pattern compiles exactly when problem(with:) has nothing to say;
// - URLPattern.Subject's two readers agree: the byte-wise one every
//   request takes and the Unicode one for URLs with non-ASCII text, on
//   any ASCII URL (the byte-wise one is the other's fast path);
// - a URL with a scheme and no wildcard or query characters, used as a
//   pattern, matches itself;
// - matching is case-insensitive in the host;
// - an SSL-proxying list that includes a host pattern intercepts what
//   the pattern matches, unless the same pattern also excludes it.
import FuzzSupport

@testable import BusymateShared

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        let split = bytes.firstIndex(of: 0x0A) ?? bytes.count
        let patternText = String(decoding: bytes[..<split], as: UTF8.self)
        let url = split < bytes.count ? String(decoding: bytes[(split + 1)...], as: UTF8.self) : ""

        let pattern = URLPattern(patternText)
        Fuzz.check(
            (pattern == nil) == (URLPattern.problem(with: patternText) != nil),
            "URLPattern and problem(with:) disagree on \(Fuzz.show(patternText))")

        let subject = URLPattern.Subject(url)
        // Known, fuzz/crashes/README.md: a port of more than ten digits
        // (leading zeros) is a port to the Unicode reader only.
        if url.utf8.allSatisfy({ $0 < 0x80 }), strict || !url.contains(/:[0-9]{11,}/) {
            let unicode = URLPattern.Subject(unicode: url)
            Fuzz.check(subject == unicode, "Subject(\(Fuzz.show(url))): the byte-wise reader says \(subject), the Unicode one \(unicode)")
        }
        if let pattern {
            Fuzz.check(pattern.matches(url) == pattern.matches(subject), "matches(String) and matches(Subject) disagree")
            if url.unicodeScalars.allSatisfy(\.isASCII), let upper = asciiUppercasedHost(url) {
                Fuzz.check(
                    pattern.matches(url) == pattern.matches(upper),
                    "\(Fuzz.show(patternText)) matches \(Fuzz.show(url)) and \(Fuzz.show(upper)) differently")
            }
        }
        // (A host that normalizes to nothing, ".", matches nothing: by design.)
        if url.contains("://"), !url.contains(where: { "*?#".contains($0) }), !subject.host.isEmpty, strict || !url.contains(/:[0-9]{11,}/),
            let itself = URLPattern(url)
        {
            Fuzz.check(itself.matches(url), "\(Fuzz.show(url)) as a pattern does not match itself")
        }

        // Host patterns.
        if SSLProxyMatcher.problem(with: patternText) == nil {
            let host = url
            let include = SSLProxyMatcher(include: [patternText], exclude: [])
            let both = SSLProxyMatcher(include: ["*", patternText], exclude: [patternText])
            let matched = include.shouldIntercept(host: host)
            Fuzz.check(
                !both.shouldIntercept(host: host) || !matched,
                "\(Fuzz.show(patternText)) both included and excluded \(Fuzz.show(host)), yet intercepted")
            Fuzz.check(
                SSLProxyMatcher(include: ["*"], exclude: []).shouldIntercept(host: host) || !matched,
                "\(Fuzz.show(host)) matched by \(Fuzz.show(patternText)) but not by *")
            let proxy = UpstreamProxySetting(host: "127.0.0.1", port: 3128, bypass: [patternText])
            Fuzz.check(proxy.carries(host) == !matched, "upstream_proxy bypass disagrees with the SSL-proxying list on \(Fuzz.show(host))")
        }
    }
}
