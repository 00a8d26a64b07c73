import Foundation
import Testing

@testable import ProxyClient

@Suite struct CurlImportTests {
    /// Chrome's "Copy as cURL (bash)": $'…' for a body with a quote and a
    /// line break, -H per header, --compressed.
    @Test func aBrowsersCopyAsCurlIsTheRequest() throws {
        let command = #"""
            curl 'https://api.example.com/v1/items?q=1' \
              -H 'accept: application/json' \
              -H 'content-type: application/json' \
              -H $'x-note: it\'s' \
              --data-raw $'{"name":"a\'b","lines":"1\n2"}' \
              --compressed
            """#
        let r = try CurlImport.parse(command)
        #expect(r.method == "POST")
        #expect(r.url == "https://api.example.com/v1/items?q=1")
        #expect(r.headers.map(\.0) == ["accept", "content-type", "x-note", "Accept-Encoding"])
        #expect(r.headers[2].1 == "it's")
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"name\":\"a'b\",\"lines\":\"1\n2\"}")
    }

    @Test func curlsOwnDefaultsAndForms() throws {
        var r = try CurlImport.parse("curl -sSL -XPUT example.com/x -d a=1 -d b=2 -A agent/1 -u user:pw -b 'c=1; d=2'")
        #expect(r.method == "PUT" && r.url == "http://example.com/x")
        #expect(String(decoding: r.body, as: UTF8.self) == "a=1&b=2")
        #expect(r.headers.contains { $0 == ("Content-Type", "application/x-www-form-urlencoded") })
        #expect(r.headers.contains { $0 == ("Authorization", "Basic dXNlcjpwdw==") })
        #expect(r.headers.contains { $0 == ("Cookie", "c=1; d=2") } && r.headers.contains { $0 == ("User-Agent", "agent/1") })
        r = try CurlImport.parse("curl -G --data-urlencode 'q=a b&c' https://example.com/search")
        #expect(r.method == "GET" && r.url == "https://example.com/search?q=a+b%26c" && r.body.isEmpty, "curl 7.77 and later: a space is +")
        r = try CurlImport.parse(#"curl -I "https://example.com/a\"b""#)
        #expect(r.method == "HEAD" && r.url == "https://example.com/a\"b")
        r = try CurlImport.parse(
            "curl --request=DELETE --url=https://example.com/1 -H 'X-Empty;' -o /dev/null -m 5 -x http://127.0.0.1:9090")
        #expect(r.method == "DELETE" && r.headers.contains { $0 == ("X-Empty", "") })
        // Short options as curl reads them: a value-taking one ends the group, its value the rest or the next word.
        r = try CurlImport.parse("curl -sXPOST https://example.com/a -fsSLo out.txt -sH 'X-A: 1' -d 'x'")
        #expect(r.method == "POST" && r.headers.contains { $0 == ("X-A", "1") })
        r = try CurlImport.parse("curl -sX PATCH https://example.com/a")
        #expect(r.method == "PATCH")
        // `-H 'Accept:'` removes a header curl would add; a -d value is sent as given, line breaks too.
        r = try CurlImport.parse("curl -H 'Accept:' -H 'Content-Type:' -d $'a\\nb' https://example.com/")
        #expect(!r.headers.contains { $0.0.lowercased() == "accept" || $0.0.lowercased() == "content-type" })
        #expect(String(decoding: r.body, as: UTF8.self) == "a\nb")
        // $'…' escapes are bytes: UTF-8 from \x, octal, \u.
        r = try CurlImport.parse("curl --data-raw $'caf\\xc3\\xa9 \\101\\u00e9' https://example.com/")
        #expect(String(decoding: r.body, as: UTF8.self) == "café Aé")
    }

    @Test func whatItCannotTakeIsRefusedByName() {
        func refusal(_ command: String) -> String {
            do {
                _ = try CurlImport.parse(command)
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(refusal("curl --form a=1 https://example.com/").contains("curl option --form is not one the import takes"))
        #expect(refusal("curl -sF a=1 https://example.com/").contains("-F"))
        #expect(refusal("curl -d @body.json https://example.com/").contains("reads a file"))
        #expect(refusal("curl https://a.example/ https://b.example/").contains("two URLs"))
        #expect(refusal("curl -H \"Authorization: $TOKEN\" https://example.com/").contains("shell variable"))
        #expect(refusal("curl https://example.com/ | jq .").contains("shell syntax"))
        #expect(refusal("wget https://example.com/").contains("must start with curl"))
        #expect(refusal("curl 'https://example.com/").contains("not closed"))
        #expect(refusal("curl ftp://example.com/").contains("only http:// and https://"))
        #expect(refusal("curl -H 'X-A: 1\r\nX-B: 2' https://example.com/").contains("line break"))
        #expect(refusal("curl -I -d a=1 https://example.com/").contains("two methods"))
        #expect(refusal("curl --data-urlencode name@file.txt https://example.com/").contains("reads a file"))
        #expect(refusal("curl --data-raw $'\\xff' https://example.com/").contains("not UTF-8"))
    }
}
