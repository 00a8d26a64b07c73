import Foundation
import Testing

@testable import BusymateShared
@testable import CaptureStore

/// The filter language's parser: every clause, precedence, and errors with
/// the position at fault.
@Suite struct CaptureFilterParserTests {
    typealias F = CaptureFilter
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func c(_ clause: F.Clause) -> F { .clause(clause) }

    static let clauses: [(String, F)] = [
        ("~all", c(.all)),
        ("~d example\\.com", c(.domain("example\\.com"))),
        ("~u /api/v1", c(.url("/api/v1"))),
        ("/api/v1", c(.url("/api/v1"))),
        ("~m post", c(.method("post"))),
        ("~c 404", c(.status(404...404))),
        ("~c 4xx", c(.status(400...499))),
        ("~c 5XX", c(.status(500...599))),
        ("~c 500-503", c(.status(500...503))),
        ("~h \"x-trace: 1\"", c(.header("x-trace: 1", .either))),
        ("~hq authorization", c(.header("authorization", .request))),
        ("~hs set-cookie", c(.header("set-cookie", .response))),
        ("~b needle", c(.body("needle", .either))),
        ("~bq 'a \\' quote'", c(.body("a ' quote", .request))),
        ("~bs \"[0-9]{3}\"", c(.body("[0-9]{3}", .response))),
        ("~t json", c(.contentType("json", .either))),
        ("~tq form", c(.contentType("form", .request))),
        ("~ts html", c(.contentType("html", .response))),
        ("~e", c(.error)),
        ("~q", c(.noResponse)),
        ("~src 10\\.0\\.", c(.source("10\\.0\\."))),
        ("~dst :443$", c(.destination(":443$"))),
        ("~websocket", c(.websocket)),
        ("~marked", c(.marked)),
        ("~replay", c(.replay)),
        ("~replayq", c(.replay)),
        ("~replays", c(.replayedResponse)),
        ("~marker 🔥", c(.marker("🔥"))),
        ("~comment \"login bug\"", c(.comment("login bug"))),
        ("~s", c(.response)),
        ("~a", c(.asset)),
        ("~http", c(.http)),
        ("~tcp", c(.tcp)),
        ("~udp", c(.udp)),
        ("~tls mitm", c(.tls(.mitm))),
        ("~tls PASSTHROUGH", c(.tls(.passthrough))),
        ("~tls none", c(.tls(.none))),
        ("~proto h2", c(.proto(.h2))),
        ("~proto H1", c(.proto(.h1))),
        ("~grpc", c(.grpc)),
        ("~rule mock", c(.rule("mock"))),
        ("~device \"Anna's phone\"", c(.device("Anna's phone"))),
        ("~since 10m", c(.since(now.addingTimeInterval(-600)))),
        ("~since 1.5h", c(.since(now.addingTimeInterval(-5400)))),
        ("~until 2d", c(.until(now.addingTimeInterval(-172_800)))),
        ("~since 2026-11-23T10:00:00Z", c(.since(Date(timeIntervalSince1970: 1_795_428_000)))),
    ]

    @Test(arguments: clauses) func eachClauseParses(_ text: String, _ expected: F) throws {
        #expect(try F.parse(text, now: Self.now) == expected)
    }

    static let precedence: [(String, F)] = [
        // ! binds tightest, then &, then |.
        ("!~e & ~q", .and(.not(c(.error)), c(.noResponse))),
        ("~e & ~q | ~all", .or(.and(c(.error), c(.noResponse)), c(.all))),
        ("~all | ~e & ~q", .or(c(.all), .and(c(.error), c(.noResponse)))),
        ("!(~all | ~e)", .not(.or(c(.all), c(.error)))),
        ("!!~e", .not(.not(c(.error)))),
        // Side by side is and, loosest of all, as in mitmproxy.
        ("~all | ~e ~q", .and(.or(c(.all), c(.error)), c(.noResponse))),
        ("~d a ~m GET", .and(c(.domain("a")), c(.method("GET")))),
        // Left-associative.
        ("~e & ~q & ~all", .and(.and(c(.error), c(.noResponse)), c(.all))),
        ("(~e)", c(.error)),
        ("  ( ~e|~q )  ", .or(c(.error), c(.noResponse))),
        ("~u a(b)", .and(c(.url("a")), c(.url("b")))),
    ]

    @Test(arguments: precedence) func operatorsBindAsMitmproxys(_ text: String, _ expected: F) throws {
        #expect(try F.parse(text, now: Self.now) == expected)
    }

    static let errors: [(String, Int, String)] = [
        ("", 1, "the filter is empty"),
        ("~c 4x5", 4, "a status is a code"),
        ("~c 600", 4, "a status is a code"),
        ("~c 500-404", 4, "a status is a code"),
        ("~x foo", 1, "unknown filter ~x"),
        ("~d a & ~nope", 8, "unknown filter ~nope"),
        ("~meta x", 1, "~meta: Busymate keeps no flow metadata"),
        ("~marker", 8, "~marker needs a value"),
        ("~ foo", 1, "~ needs a filter name"),
        ("~d", 3, "~d needs a value"),
        ("~u (", 4, "~u needs a value"),
        ("~e &", 5, "expected a filter after &"),
        ("~e | | ~q", 6, "expected a filter after |"),
        ("!", 2, "expected a filter after !"),
        ("& ~e", 1, "expected a filter before &"),
        ("(~e", 1, "this ( is never closed"),
        ("~e)", 3, "there is no ( for this )"),
        ("()", 2, "empty parentheses"),
        ("~u \"abc", 4, "this quote is never closed"),
        ("~b \"(unclosed\"", 4, "is not a valid regular expression"),
        ("foo[", 1, "is not a valid regular expression"),
        ("~tls maybe", 6, "~tls is mitm, passthrough or none"),
        ("~proto h3", 8, "~proto is h1 (HTTP/1.0 or 1.1) or h2 (HTTP/2), not \"h3\""),
        ("~d a ~proto http/2", 13, "~proto is h1"),
        ("~proto", 7, "~proto needs a value"),
        ("~since yesterday", 8, "a time is a duration ago"),
    ]

    @Test(arguments: errors) func anInvalidFilterIsRefusedWithItsPosition(_ text: String, _ position: Int, _ message: String) {
        #expect {
            _ = try F.parse(text, now: Self.now)
        } throws: { error in
            guard let error = error as? FilterError else { return false }
            return error.position == position && error.message.contains(message) && error.description.hasPrefix("position \(position): ")
        }
    }
}
