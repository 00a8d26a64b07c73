import Foundation
import Testing

@testable import BusymateShared

/// `~proto` and `~grpc` read the request alone, so a rule or a request
/// breakpoint may use them, and they decide on the live request.
@Suite struct ProtocolRuleMatchTests {
    static func request(_ version: String?, contentType: String? = nil) -> FilterSubject {
        var s = FilterSubject(url: "https://grpc.example.com/helloworld.Greeter/SayHello", method: "POST")
        s.httpVersion = version
        s.requestHeaders = contentType.map { [("content-type", $0)] } ?? []
        return s
    }

    @Test func aRuleAndARequestBreakpointTakeThemAndMatchTheLiveRequest() throws {
        for kind in Rule.Kind.allCases {
            let match = try RuleMatch.parse("~proto h2 & ~grpc", for: kind).get()
            #expect(match.matches(Self.request("HTTP/2.0", contentType: "application/grpc+proto")), "\(kind)")
            #expect(!match.matches(Self.request("HTTP/1.1", contentType: "application/grpc")), "\(kind)")
            #expect(!match.matches(Self.request("HTTP/2.0", contentType: "application/json")), "\(kind)")
            #expect(!match.matches(Self.request(nil, contentType: "application/grpc")), "\(kind)")
            // Decided at the request: a headers rule does not wait for the response.
            #expect(!match.readsResponse)
        }
        let hold = try RuleMatch.parse(breakpoint: "~proto h1", response: false).get()
        #expect(hold.matches(Self.request("HTTP/1.0")) && hold.matches(Self.request("HTTP/1.1")) && !hold.matches(Self.request("HTTP/2.0")))
    }

    @Test func aBadVersionIsRefusedWithItsPosition() {
        guard case let .failure(error) = RuleMatch.parse("~d api & ~proto spdy", for: .block) else {
            Issue.record("accepted ~proto spdy")
            return
        }
        #expect(error.position == 17 && error.message.contains("~proto is h1"), "\(error)")
    }
}

extension ProtocolRuleMatchTests {
    /// The page's "test a URL" takes the request as HTTP/1.1, as `rules test` does without `--http2`.
    @Test func aURLTestedAloneIsAnHTTP1Request() throws {
        let (settings, _) = try AppSettings.decode(
            """
            {"rules": [{"name": "h1 only", "match": "~proto h1 & ~d api", "action": "block"},
                       {"name": "h2 only", "match": "~proto h2", "action": "block", "status": 418}]}
            """)
        #expect(RuleVerdict.verdicts(settings.rules, url: "https://api.example.com/").map(\.rule.name) == ["h1 only"])
    }
}
