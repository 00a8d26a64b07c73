import Foundation
import Testing

@testable import BusymateShared
@testable import CaptureStore

/// Filters compiled to SQL and run over a store built here: each filter's
/// rows, by path.
@Suite struct CaptureFilterSQLTests {
    static let base = Date(timeIntervalSince1970: 1_800_000_000)

    final class Store {
        let dir: URL
        let database: CaptureDatabase
        var traffic: TrafficRepository { TrafficRepository(database: database) }

        init() throws {
            dir = URL(fileURLWithPath: "/tmp/bmf-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("bodies"), withIntermediateDirectories: true)
            database = try CaptureDatabase(paths: GroupPaths(root: dir))
            var rows: [ExchangeRecord] = []
            func row(
                _ path: String, host: String = "api.example.com", method: String = "GET", status: Int? = 200, minutesAgo: Double,
                _ edit: (inout ExchangeRecord) -> Void = { _ in }
            ) {
                var r = ExchangeRecord(
                    startedAt: CaptureFilterSQLTests.base.addingTimeInterval(-minutesAgo * 60), scheme: "https", method: method,
                    host: host, port: 443, path: path, url: "https://\(host)\(path)", tlsMode: .mitm)
                r.status = status
                r.requestHeaders = ExchangeRecord.encodeHeaders([("Accept", "*/*"), ("User-Agent", "curl/7.88")])
                r.responseHeaders = status == nil ? nil : ExchangeRecord.encodeHeaders([("Content-Type", "application/json")])
                r.clientAddress = "127.0.0.1:5000"
                r.serverAddress = "93.184.216.34:443"
                r.httpVersion = "HTTP/1.1"
                edit(&r)
                rows.append(r)
            }
            row("/users", minutesAgo: 60)
            row("/users/9", method: "POST", status: 404, minutesAgo: 50) {
                $0.requestHeaders = ExchangeRecord.encodeHeaders([
                    ("Content-Type", "application/x-www-form-urlencoded"), ("X-Trace", "Abc-1"),
                ])
                $0.requestBody = Data("name=needle".utf8)
                $0.marker = "default"
                $0.comment = "login bug, see ticket 42"
                $0.httpVersion = "HTTP/1.0"
            }
            row("/img.png", host: "cdn.example.org", status: 503, minutesAgo: 40) {
                $0.httpVersion = "HTTP/2.0"
                $0.responseHeaders = ExchangeRecord.encodeHeaders([("Content-Type", "image/png"), ("Set-Cookie", "a=b")])
            }
            // "HTTP/2": a HAR file imported before HTTP/2 was captured.
            row("/timeout", status: nil, minutesAgo: 30) {
                $0.error = "api.example.com:443 sent no response within 120 s"
                $0.httpVersion = "HTTP/2"
            }
            row("/caf%C3%A9?q=a%20b", minutesAgo: 20) { $0.rule = "mock, headers" }
            row("/big", host: "files.example.net", minutesAgo: 10) {
                $0.responseBodyFile = "big.response"
                $0.responseBody = Data("only the first bytes".utf8)
                $0.resentFrom = "some-request-id"
                $0.marker = "🔥"
                // A gRPC call, its Content-Type in any case.
                $0.httpVersion = "HTTP/2.0"
                $0.requestHeaders = ExchangeRecord.encodeHeaders([
                    ("Accept", "*/*"), ("User-Agent", "curl/7.88"), ("Content-Type", "Application/GRPC+proto"),
                ])
                $0.streamID = 3
                $0.connectionID = "c1"
            }
            row("/ws", status: 101, minutesAgo: 5) {
                $0.responseHeaders = ExchangeRecord.encodeHeaders([("Upgrade", "WebSocket"), ("Connection", "Upgrade")])
            }
            row("", host: "pinned.example.com", status: nil, minutesAgo: 1) {
                $0.method = "CONNECT"
                $0.scheme = "tcp"
                $0.url = "pinned.example.com:443"
                $0.tlsMode = .passthrough
                $0.requestHeaders = "[]"
                $0.httpVersion = nil
            }
            _ = try TrafficRepository(database: database).insert(rows)
            // The whole body is in its file; the row keeps only its start.
            try Data("only the first bytes, and further on: haystack-word".utf8).write(
                to: dir.appendingPathComponent("bodies/big.response"))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }

        func paths(_ text: String) throws -> [String] {
            var filter = TrafficRepository.Filter()
            filter.expression = try CaptureFilter.parse(text, now: CaptureFilterSQLTests.base)
            filter.limit = 100
            return try traffic.list(filter).map(\.path).reversed()
        }
    }

    static let cases: [(String, [String])] = [
        ("~all", ["/users", "/users/9", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/big", "/ws", ""]),
        ("~d cdn", ["/img.png"]),
        ("~d ^API\\.example\\.com$", ["/users", "/users/9", "/timeout", "/caf%C3%A9?q=a%20b", "/ws"]),
        ("users", ["/users", "/users/9"]),
        ("~u users/\\d+", ["/users/9"]),
        // The URL matches as sent and percent-decoded.
        ("café", ["/caf%C3%A9?q=a%20b"]),
        ("\"q=a b\"", ["/caf%C3%A9?q=a%20b"]),
        ("~u %C3%A9", ["/caf%C3%A9?q=a%20b"]),
        ("~m post", ["/users/9"]),
        ("~c 404", ["/users/9"]),
        ("~c 5xx", ["/img.png"]),
        ("~c 100-299", ["/users", "/caf%C3%A9?q=a%20b", "/big", "/ws"]),
        ("~h \"x-trace: abc\"", ["/users/9"]),
        ("~hq set-cookie", []),
        // A header line is `Name: value`: the space after the colon is part of it (found by fuzz-filter).
        ("~h \" application/\"", ["/users", "/users/9", "/caf%C3%A9?q=a%20b", "/big"]),
        ("~hs set-cookie", ["/img.png"]),
        ("~h \"^user-agent: curl\"", ["/users", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/big", "/ws"]),
        ("~b needle", ["/users/9"]),
        ("~bq needle", ["/users/9"]),
        ("~bs needle", []),
        // Only in the body file, past what the row keeps.
        ("~bs haystack-word", ["/big"]),
        ("~t json", ["/users", "/users/9", "/caf%C3%A9?q=a%20b", "/big"]),
        ("~tq form", ["/users/9"]),
        ("~ts ^image/", ["/img.png"]),
        ("~e", ["/timeout"]),
        ("~q", ["/timeout", ""]),
        ("~src ^127\\.", ["/users", "/users/9", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/big", "/ws", ""]),
        ("~dst :443$ & ~c 404", ["/users/9"]),
        ("~websocket", ["/ws"]),
        ("~marked", ["/users/9", "/big"]),
        ("~marker 🔥", ["/big"]),
        ("~marker ^default$ & ~comment ticket", ["/users/9"]),
        ("!~marked", ["/users", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/ws", ""]),
        ("~s", ["/users", "/users/9", "/img.png", "/caf%C3%A9?q=a%20b", "/big", "/ws"]),
        ("~a", ["/img.png"]),
        ("~http", ["/users", "/users/9", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/big", "/ws"]),
        ("~tcp", [""]),
        ("!~http & !~tcp", []),
        ("~udp | ~replays", []),
        ("~replayq", ["/big"]),
        ("~device phone", []),
        ("~replay", ["/big"]),
        ("~tls passthrough", [""]),
        ("~tls mitm & ~c 101", ["/ws"]),
        ("~rule ^mock", ["/caf%C3%A9?q=a%20b"]),
        // The HTTP version the client spoke; a tunnel has none.
        ("~proto h2", ["/img.png", "/timeout", "/big"]),
        ("~proto H1", ["/users", "/users/9", "/caf%C3%A9?q=a%20b", "/ws"]),
        ("!~proto h1 & !~proto h2", [""]),
        ("~grpc", ["/big"]),
        ("~proto h2 & !~grpc", ["/img.png", "/timeout"]),
        ("~since 12m", ["/big", "/ws", ""]),
        ("~until 45m", ["/users", "/users/9"]),
        ("~since 45m & ~until 25m", ["/img.png", "/timeout"]),
        // Negation includes the rows where the subject is missing.
        ("!~c 2xx", ["/users/9", "/img.png", "/timeout", "/ws", ""]),
        ("!~rule mock", ["/users", "/users/9", "/img.png", "/timeout", "/big", "/ws", ""]),
        ("~d cdn | ~m post", ["/users/9", "/img.png"]),
        ("!(~d api | ~d cdn)", ["/big", ""]),
        ("~bs haystack | ~e", ["/timeout", "/big"]),
        ("~d api ~c 404", ["/users/9"]),
        // Negation and precedence with the fewest parentheses SQLite is given.
        ("!~e", ["/users", "/users/9", "/img.png", "/caf%C3%A9?q=a%20b", "/big", "/ws", ""]),
        ("!~replay", ["/users", "/users/9", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/ws", ""]),
        ("!~since 12m", ["/users", "/users/9", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b"]),
        ("!~h \"x-trace: abc\"", ["/users", "/img.png", "/timeout", "/caf%C3%A9?q=a%20b", "/big", "/ws", ""]),
        ("~m get & !~h user-agent", []),
        ("~e | ~c 404 & ~d api", ["/users/9", "/timeout"]),
        ("!(~e | ~c 404) & ~d api", ["/users", "/caf%C3%A9?q=a%20b", "/ws"]),
        ("!!~c 404", ["/users/9"]),
    ]

    @Test func everyClauseSelectsItsRows() throws {
        let store = try Store()
        for (filter, expected) in Self.cases {
            let got = try store.paths(filter)
            #expect(got == expected, "\(filter): \(got)")
        }
    }

    @Test func aBodyClauseRunsLastInAnAnd() throws {
        let filter = try CaptureFilter.parse("~b x & ~d a & !~bs y | ~c 200 & ~m GET")
        guard case let .or(left, _) = filter else {
            Issue.record("\(filter)")
            return
        }
        let store = try Store()
        let text = try store.database.pool.read { db in try left.sql.build(db).sql }
        let cheap = try #require(text.range(of: "busymate_match("), "\(text)")
        let body = try #require(text.range(of: "busymate_match_body("), "\(text)")
        #expect(cheap.lowerBound < body.lowerBound, "\(text)")
    }

    @Test func pagesGoBackFromAnID() throws {
        let store = try Store()
        var filter = TrafficRepository.Filter()
        filter.limit = 3
        let first = try store.traffic.list(filter)
        #expect(first.map(\.path) == ["", "/ws", "/big"])
        filter.before = first.last?.id
        #expect(try store.traffic.list(filter).map(\.path) == ["/caf%C3%A9?q=a%20b", "/timeout", "/img.png"])
    }

    // MARK: hostile filters (issue 21: they trapped, overflowed the stack, or froze the API)

    @Test(arguments: [
        ("~since infd", 8, "a duration is a number and a unit"),
        ("~since 1e300d", 8, "a duration is a number and a unit"),
        ("~until 99999999999d", 8, "more than 100 years ago"),
        ("~since nanm", 8, "a duration is a number and a unit"),
        ("~since 0x10d", 8, "a duration is a number and a unit"),
        ("~u mitm\u{0}ZZ", 8, "a NUL character cannot be part of a filter"),
    ])
    func durationsAndNULAreRefusedWithTheirPosition(_ text: String, _ position: Int, _ message: String) {
        #expect(throws: FilterError.self) { try CaptureFilter.parse(text, now: Self.base) }
        do {
            _ = try CaptureFilter.parse(text, now: Self.base)
        } catch {
            #expect(error.position == position && error.message.contains(message), "\(text): \(error)")
        }
    }

    /// Found by fuzz-filter: ICU's date parser (behind ISO8601DateFormatter)
    /// died of SIGFPE on a fraction of a second of 35 digits or more.
    @Test(arguments: [
        "~until 2027-01-15T08:00:00." + String(repeating: "1", count: 35) + "Z",
        "~since 2027-01-15T08:00:00." + String(repeating: "0", count: 60),
    ])
    func aDateWithAHugeFractionIsRefusedNotACrash(_ text: String) {
        do {
            _ = try CaptureFilter.parse(text, now: Self.base)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.position == 8 && error.message.contains("ISO 8601"), "\(error)")
        }
    }

    @Test func aDateFarOutIsClampedNotTrapped() {
        #expect(DatabaseDateText.string(Date(timeIntervalSince1970: -1e15)) == "0001-01-01 00:00:00.000")
        #expect(DatabaseDateText.string(Date(timeIntervalSince1970: 1e15)) == "9999-12-31 23:59:59.999")
        #expect(DatabaseDateText.string(Date(timeIntervalSince1970: .infinity)) == "9999-12-31 23:59:59.999")
        #expect(DatabaseDateText.string(Date(timeIntervalSince1970: -.infinity)) == "0001-01-01 00:00:00.000")
    }

    @Test func thousandsOfParenthesesOrBangsAreRefusedNotAStackOverflow() throws {
        for text in [
            String(repeating: "(", count: 3000) + "~all" + String(repeating: ")", count: 3000),
            String(repeating: "!", count: 3000) + "~all",
            String(repeating: "(!", count: 2000) + "~all" + String(repeating: ")", count: 2000),
        ] {
            do {
                _ = try CaptureFilter.parse(text)
                Issue.record("accepted \(text.prefix(20))…")
            } catch {
                #expect(error.message.contains("nest at most"), "\(error)")
                #expect(
                    error.position == CaptureFilterParser.maxDepth + 1 || error.position == 2 * CaptureFilterParser.maxDepth + 1
                        || error.position == 2 * CaptureFilterParser.maxDepth, "\(error)")
            }
        }
    }

    @Test func theDeepestNestingAllowedRunsInSQLite() throws {
        let store = try Store()
        // Every level as dear to SQLite's parser as it gets: a negation, an or, an and.
        var text = "~c 404"
        var levels = 0
        while levels + 4 <= CaptureFilterParser.maxDepth {
            text = "!(!(\(text) | ~d nothing-here) & ~all)"
            levels += 4
        }
        #expect(levels == CaptureFilterParser.maxDepth)
        let depth = CaptureFilterParser.maxDepth
        #expect(try store.paths(String(repeating: "!", count: depth) + "~c 404") == ["/users/9"])
        #expect(
            try store.paths(String(repeating: "(!", count: depth / 2) + "~c 404" + String(repeating: ")", count: depth / 2)) == ["/users/9"]
        )
        _ = try store.paths(String(repeating: "(~e | ~d a & !", count: depth / 2) + "~c 404" + String(repeating: ")", count: depth / 2))
        _ = try store.paths(
            String(repeating: "(~e | ~h a & !(~b x | ", count: depth / 3) + "~c 404" + String(repeating: "))", count: depth / 3))
        // The dearest leaf to SQLite's parser (its SQL nests most) at the bottom of every shape.
        for level in ["(~u a | ~u a & ", "!(~u a | ~h a & ", "(~e & !", "(~h a | !"] {
            let count = depth / (level.filter { $0 == "(" || $0 == "!" }.count)
            _ = try store.paths(
                String(repeating: level, count: count) + "~websocket"
                    + String(repeating: ")", count: count * level.filter { $0 == "(" }.count))
        }
        #expect(try store.paths(text) == ["/users/9"])
    }

    @Test func aLongDisjunctionCompilesFlatAndRuns() throws {
        let store = try Store()
        let eighty = (0..<79).map { "~d host\($0).invalid" }.joined(separator: " | ") + " | ~d cdn"
        #expect(try store.paths(eighty) == ["/img.png"])
        let most = (0..<(CaptureFilterParser.maxClauses - 1)).map { "~u nope\($0)" }.joined(separator: " | ") + " | ~c 404"
        #expect(try store.paths(most) == ["/users/9"])
        let headers = (0..<(CaptureFilterParser.maxClauses - 1)).map { "~h nope\($0)" }.joined(separator: " | ") + " | ~c 404"
        #expect(try store.paths("!(!(" + headers + "))") == ["/users/9"])
        let ands = (0..<(CaptureFilterParser.maxClauses - 1)).map { "!~u nope\($0)" }.joined(separator: " ") + " ~c 404"
        #expect(try store.paths(ands) == ["/users/9"])
        do {
            _ = try CaptureFilter.parse(most + " | ~e")
            Issue.record("\(CaptureFilterParser.maxClauses + 1) clauses accepted")
        } catch {
            #expect(error.message.contains("at most \(CaptureFilterParser.maxClauses) clauses"), "\(error)")
        }
    }

    @Test func aBacktrackingRegexIsStoppedWithAClearErrorAndNoSQL() throws {
        let store = try Store()
        var row = ExchangeRecord(
            startedAt: Self.base, scheme: "http", method: "GET", host: "a.example", port: 80,
            path: "/" + String(repeating: "a", count: 30), url: "http://a.example/" + String(repeating: "a", count: 30), tlsMode: .none)
        row.status = 200
        _ = try store.traffic.insert([row])
        let clock = ContinuousClock()
        let started = clock.now
        do {
            let got = try store.paths("~u '(a+)+b'")
            Issue.record("the query ran to its end: \(got)")
        } catch {
            let text = StoreHealth.describe(error)
            #expect(text.contains("ran over") && text.contains("(a+)+b"), "\(text)")
            #expect(!text.contains("SELECT") && !text.contains("busymate_match"), "\(text)")
        }
        #expect(clock.now - started < .seconds(5))
        // A pattern that needs a regular expression but does not backtrack still matches.
        #expect(try store.paths("~u 'a{30}$'") == ["/" + String(repeating: "a", count: 30)])
    }
}
