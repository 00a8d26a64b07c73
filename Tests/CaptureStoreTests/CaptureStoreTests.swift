import BusymateShared
import Foundation
import GRDB
import Testing

@testable import CaptureStore

@Suite struct CaptureStoreTests {
    final class Store {
        let dir: URL
        let database: CaptureDatabase
        init() throws {
            dir = URL(fileURLWithPath: "/tmp/bmc-\(UInt32.random(in: 0...UInt32.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            database = try CaptureDatabase(paths: GroupPaths(root: dir))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }
        var traffic: TrafficRepository { TrafficRepository(database: database) }
    }

    private func exchange(_ host: String, _ method: String = "GET", status: Int? = 200, at offset: TimeInterval, path: String = "/")
        -> ExchangeRecord
    {
        var r = ExchangeRecord(
            startedAt: Date(timeIntervalSince1970: 1_800_000_000 + offset), scheme: "https", method: method,
            host: host, port: 443, path: path, url: "https://\(host)\(path)", tlsMode: .mitm)
        r.status = status
        r.requestHeaders = ExchangeRecord.encodeHeaders([("Accept", "*/*"), ("X-Trace", "abc"), ("X-Trace", "def")])
        return r
    }

    @Test func insertsAndListsNewestFirstWithHeadersInOrder() throws {
        let store = try Store()
        let saved = try store.traffic.insert([exchange("a.example.com", at: 1), exchange("b.example.com", at: 2)])
        #expect(saved.allSatisfy { $0.id != nil })
        let listed = try store.traffic.list(.init())
        #expect(listed.map(\.host) == ["b.example.com", "a.example.com"])
        let headers = ExchangeRecord.decodeHeaders(listed[0].requestHeaders)
        #expect(headers.map(\.0) == ["Accept", "X-Trace", "X-Trace"])
        #expect(headers.map(\.1) == ["*/*", "abc", "def"])
    }

    @Test func aRetriedInsertOfTheSameRequestIsIgnored() throws {
        let store = try Store()
        let record = exchange("a.example.com", at: 1)
        _ = try store.traffic.insert([record])
        _ = try store.traffic.insert([record])
        #expect(try store.traffic.count() == 1)
    }

    @Test func filtersByHostMethodStatusTimeAndText() throws {
        let store = try Store()
        _ = try store.traffic.insert([
            exchange("api.example.com", "GET", status: 200, at: 1, path: "/users"),
            exchange("api.example.com", "POST", status: 404, at: 2, path: "/users/9"),
            exchange("cdn.example.org", "GET", status: 503, at: 3, path: "/img.png"),
            exchange("api.example.com", "GET", status: nil, at: 4, path: "/timeout"),
        ])
        func hosts(_ build: (inout TrafficRepository.Filter) -> Void) throws -> [String] {
            var f = TrafficRepository.Filter()
            build(&f)
            return try store.traffic.list(f).map(\.path)
        }
        #expect(try hosts { $0.hostGlob = "*.example.com" } == ["/timeout", "/users/9", "/users"])
        #expect(try hosts { $0.method = "post" } == ["/users/9"])
        #expect(try hosts { $0.status = 400...499 } == ["/users/9"])
        #expect(try hosts { $0.status = 500...599 } == ["/img.png"])
        #expect(try hosts { $0.since = Date(timeIntervalSince1970: 1_800_000_002.5) } == ["/timeout", "/img.png"])
        #expect(try hosts { $0.search = "users/9" } == ["/users/9"])
        #expect(try hosts { $0.limit = 1 } == ["/timeout"])
    }

    @Test func pruningKeepsTheNewest() async throws {
        let store = try Store()
        _ = try store.traffic.insert((0..<10).map { exchange("h\($0).example.com", at: Double($0)) })
        #expect(try await store.traffic.prune(.init(maxExchanges: 3, maxBytes: .max)) == 7)
        #expect(try store.traffic.list(.init()).map(\.host) == ["h9.example.com", "h8.example.com", "h7.example.com"])
    }

    @Test func theWritersCommitAppliesRetentionAsItGoes() async throws {
        let store = try Store()
        let retention = TrafficRepository.Retention(maxExchanges: 100, maxBytes: 50_000)
        var size: TrafficRepository.Size?
        var removed = 0
        for batch in 0..<10 {
            let records = (0..<30).map { i -> ExchangeRecord in
                var r = exchange("h\(batch * 30 + i).example.com", at: Double(batch * 30 + i))
                r.storedBytes = 100
                return r
            }
            let trimmed = try await store.traffic.save(records, keeping: retention, size: size)
            size = trimmed.size
            removed += trimmed.removed
        }
        #expect(removed == 200)
        #expect(size == .init(exchanges: 100, bytes: 10_000))
        var all = TrafficRepository.Filter()
        all.limit = 1000
        #expect(try store.traffic.list(all).map(\.host) == (200..<300).reversed().map { "h\($0).example.com" })
        // Bytes: 10 KB kept, limit lowered to 2.5 KB → 25 rows stay.
        let trimmed = try await store.traffic.save([], keeping: .init(maxExchanges: 100, maxBytes: 2_500), size: size)
        #expect(trimmed.removed == 75 && trimmed.size == .init(exchanges: 25, bytes: 2_500))
        #expect(try store.traffic.count() == 25)
        // A size that drifted (rows removed behind the writer's back) is measured again, and nothing more goes.
        let drifted = try await store.traffic.save(
            [], keeping: .init(maxExchanges: 20, maxBytes: .max), size: .init(exchanges: 500, bytes: 0))
        #expect(drifted.removed == 5 && drifted.size == .init(exchanges: 20, bytes: 2_000))
        #expect(try store.traffic.count() == 20)
    }

    @Test func dnsRowsHaveARetentionOfTheirOwnAndNeverEvictExchanges() async throws {
        let store = try Store()
        func dns(_ i: Int) -> ExchangeRecord {
            var r = ExchangeRecord(
                startedAt: Date(timeIntervalSince1970: 1_800_000_000 + Double(i)), scheme: "dns", method: "DNS",
                host: "q\(i).example.com", port: 53, path: "/A", url: "dns://q\(i).example.com/A", tlsMode: .none)
            r.storedBytes = 10
            return r
        }
        var size: TrafficRepository.Size?
        var lastID: Int64?
        func save(_ records: [ExchangeRecord], _ retention: TrafficRepository.Retention) async throws {
            let trimmed = try await store.traffic.save(records, keeping: retention, size: size, lastID: lastID)
            (size, lastID) = (trimmed.size, trimmed.lastID)
        }
        // 20 exchanges, then a flood of 5,000 DNS rows: capture.max_exchanges (100) is the exchanges' alone.
        try await save((0..<20).map { exchange("h\($0).example.com", at: Double($0)) }, .init(maxExchanges: 100, maxBytes: 1_000))
        for batch in 0..<50 { try await save((0..<100).map { dns(batch * 100 + $0) }, .init(maxExchanges: 100, maxBytes: 1_000)) }
        var all = TrafficRepository.Filter()
        all.limit = 10_000
        #expect(try store.traffic.list(all).filter { !$0.isDNS }.count == 20)
        #expect(try store.traffic.count() == 5_020)
        // capture.max_dns_rows: the oldest DNS rows go, every exchange stays.
        try await save([dns(5_000)], .init(maxExchanges: 100, maxBytes: 1_000, maxDNSRows: 300))
        let rows = try store.traffic.list(all)
        #expect(rows.filter { !$0.isDNS }.count == 20)
        #expect(rows.filter(\.isDNS).map(\.host) == (4_701...5_000).reversed().map { "q\($0).example.com" })
        #expect(size == .init(exchanges: 20, bytes: 0, dns: 300))
        // And exchanges past theirs go without touching DNS rows.
        try await save(
            (20..<130).map { exchange("h\($0).example.com", at: Double($0)) }, .init(maxExchanges: 100, maxBytes: 1_000, maxDNSRows: 300))
        let after = try store.traffic.list(all)
        #expect(after.filter { !$0.isDNS }.map(\.host) == (30..<130).reversed().map { "h\($0).example.com" })
        #expect(after.filter(\.isDNS).count == 300)
        #expect(try store.traffic.size() == .init(exchanges: 100, bytes: 0, dns: 300))
    }

    @Test func rowsStoredBehindTheWritersBackAreCountedAtItsNextCommit() async throws {
        let store = try Store()
        let retention = TrafficRepository.Retention(maxExchanges: 100, maxBytes: .max)
        var trimmed = try await store.traffic.save(
            (0..<90).map { exchange("live\($0).example.com", at: Double($0)) }, keeping: retention, size: nil)
        // An import fills the store to its cap.
        _ = try store.traffic.insert((0..<10).map { exchange("imported\($0).example.com", at: 100 + Double($0)) })
        trimmed = try await store.traffic.save(
            (90..<95).map { exchange("live\($0).example.com", at: 200 + Double($0)) }, keeping: retention,
            size: trimmed.size, lastID: trimmed.lastID)
        #expect(trimmed.removed == 5)
        #expect(try store.traffic.count() == 100)
    }

    @Test func requestIDsAreVersion7AndSortByTime() throws {
        // RFC 9562, appendix A.6.
        #expect(
            RequestID.make(milliseconds: 0x017F_22E2_79B0, random: 0xCC3, 0x18C4_DC0C_0C07_398F) == "017f22e2-79b0-7cc3-98c4-dc0c0c07398f")
        let earlier = RequestID.make(at: Date(timeIntervalSince1970: 1_800_000_000))
        let later = RequestID.make(at: Date(timeIntervalSince1970: 1_800_000_000.002))
        #expect(earlier < later)
        #expect(UUID(uuidString: later) != nil && later.count == 36 && later == later.lowercased())
        #expect(Array(later)[14] == "7" && "89ab".contains(Array(later)[19]))
    }

    @Test func pruningByBytesRemovesTheOldestAndTheirBodyFiles() async throws {
        let store = try Store()
        let bodies = BodyStore(paths: GroupPaths(root: store.dir))
        try FileManager.default.createDirectory(at: bodies.directory, withIntermediateDirectories: true)
        // Five exchanges of 1000 stored bytes each, every one with a body file.
        let records = try (0..<5).map { i -> ExchangeRecord in
            var r = exchange("h\(i).example.com", at: Double(i))
            r.responseBodyFile = BodyStore.fileName(requestID: r.requestID, .response)
            r.storedBytes = 1000
            try Data(repeating: 0x61, count: 1000).write(to: bodies.url(r.responseBodyFile ?? ""))
            return r
        }
        _ = try store.traffic.insert(records)
        #expect(try await store.traffic.prune(.init(maxExchanges: 100, maxBytes: 2500)) == 3)
        #expect(try store.traffic.list(.init()).map(\.host) == ["h4.example.com", "h3.example.com"])
        let left = try FileManager.default.contentsOfDirectory(atPath: bodies.directory.path).sorted()
        #expect(left == records[3...].compactMap(\.responseBodyFile).sorted())
        #expect(try store.traffic.bodyFiles() == Set(left))
        #expect(try bodies.body(of: records[4], .response)?.count == 1000)
        #expect(throws: BodyStoreError.self) { try bodies.body(of: records[0], .response) }
    }

    @Test func orphansAreOldBodyFilesNoRowNamesAndLeftoverSpares() throws {
        let store = try Store()
        let bodies = BodyStore(paths: GroupPaths(root: store.dir))
        try FileManager.default.createDirectory(at: bodies.directory, withIntermediateDirectories: true)
        for name in ["kept.response", "lost.request", "7.spare", "notes.txt", "fresh.response"] {
            try Data("x".utf8).write(to: bodies.url(name))
        }
        let old = Date().addingTimeInterval(-600)
        for name in ["kept.response", "lost.request", "7.spare", "notes.txt"] {
            try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: bodies.url(name).path)
        }
        #expect(bodies.orphans(referenced: ["kept.response"]).sorted() == ["7.spare", "lost.request"])
    }

    @Test func decodesGzipDeflateAndBrotli() throws {
        let text = Data(String(repeating: "busymate ", count: 200).utf8)
        // Made with python3's gzip and zlib.
        func gzip(_ args: [String]) throws -> Data {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = ["-c", "import sys,zlib,gzip; d=sys.stdin.buffer.read(); sys.stdout.buffer.write(" + args[0] + ")"]
            let input = Pipe(), output = Pipe()
            p.standardInput = input
            p.standardOutput = output
            try p.runSerialized()
            input.fileHandleForWriting.write(text)
            try input.fileHandleForWriting.close()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            p.waitForExit()
            return data
        }
        #expect(BodyDecoder.decode(try gzip(["gzip.compress(d)"]), encoding: "gzip") == text)
        #expect(BodyDecoder.decode(try gzip(["zlib.compress(d)"]), encoding: "deflate") == text)
        #expect(BodyDecoder.decode(try gzip(["zlib.compress(d)[2:-4]"]), encoding: "deflate") == text)
        #expect(BodyDecoder.decode(Self.brotliOfBusymate, encoding: "br") == Data("busymate busymate busymate\n".utf8))
        #expect(BodyDecoder.decode(Data("not gzip".utf8), encoding: "gzip") == nil)
        #expect(BodyDecoder.decode(Data("x".utf8), encoding: "zstd") == nil)
    }

    /// `BrotliEncoderCompress(11, 22, BROTLI_MODE_TEXT, "busymate busymate busymate\n")`
    /// from libbrotlienc 1.0.9.
    static let brotliOfBusymate = Data([
        0x1b, 0x1a, 0x00, 0xf8, 0x1d, 0xa9, 0x53, 0x9f, 0xbb, 0x70, 0x25, 0x56, 0xd7, 0x0a, 0x20,
        0x73, 0x74, 0x3a, 0xac, 0xac, 0x2d, 0x4f, 0x29, 0xa2, 0x4f, 0x30, 0xf0, 0x76, 0xac, 0x00,
    ])

    @Test func pinnedDomainsCountRefusals() throws {
        let store = try Store()
        let pinned = PinnedDomainRepository(database: store.database)
        try pinned.record("Pinned.Example.com", reason: "unknown ca", at: Date(timeIntervalSince1970: 100))
        try pinned.record("pinned.example.com", reason: "closed", at: Date(timeIntervalSince1970: 200))
        let all = try pinned.all()
        #expect(all.count == 1)
        #expect(all.first?.count == 2)
        #expect(all.first?.firstSeen == Date(timeIntervalSince1970: 100))
        #expect(all.first?.lastSeen == Date(timeIntervalSince1970: 200))
        #expect(try pinned.remove("pinned.example.com"))
        #expect(try pinned.all().isEmpty)
    }

    @Test func aSecondProcessReadsWhatTheWriterCommitted() throws {
        let store = try Store()
        _ = try store.traffic.insert([exchange("a.example.com", at: 1)])
        let reader = try CaptureDatabase(paths: GroupPaths(root: store.dir), readOnly: true)
        #expect(try TrafficRepository(database: reader).count() == 1)
        let mode =
            try FileManager.default.attributesOfItem(atPath: store.dir.appendingPathComponent("capture.sqlite").path)[.posixPermissions]
            as? Int
        #expect(mode == 0o660)
    }
}

@Suite struct HeaderEncodingTests {
    @Test func headersRoundTripThroughTheHandWrittenJSON() throws {
        let pairs = [
            ("Accept", "*/*"), ("X-Quote", "say \"hi\" \\ back"), ("X-Control", "a\tb\u{01}c\r\n"), ("X-Ünïcode", "日本 🚀"), ("X-Dup", "1"),
            ("X-Dup", "2"),
        ]
        let text = ExchangeRecord.encodeHeaders(pairs)
        // A strict parser reads it back, order and duplicates kept.
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String]]
        #expect(parsed?.map { $0[0] } == pairs.map(\.0))
        #expect(parsed?.map { $0[1] } == pairs.map(\.1))
        #expect(ExchangeRecord.decodeHeaders(text).map(\.1) == pairs.map(\.1))
        #expect(ExchangeRecord.encodeHeaders([(String, String)]()) == "[]")
    }

    @Test func aRowSavedAndReadBackIsTheSame() async throws {
        let dir = URL(fileURLWithPath: "/tmp/bmh-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let traffic = TrafficRepository(database: try CaptureDatabase(paths: GroupPaths(root: dir)))
        var record = ExchangeRecord(
            startedAt: Date(timeIntervalSince1970: 1_800_000_000.25), scheme: "https", method: "POST", host: "h.example",
            port: 8443, path: "/p?q=1", url: "https://h.example:8443/p?q=1", tlsMode: .mitm)
        record.connectedAt = Date(timeIntervalSince1970: 1_800_000_000.5)
        record.status = 201
        record.reason = "Created"
        record.requestHeaders = ExchangeRecord.encodeHeaders([("A", "1")])
        record.responseHeaders = "[]"
        record.requestBody = Data("body".utf8)
        record.requestBodySize = 4
        record.responseBodyFile = "x.response"
        record.responseBodyTruncated = true
        record.responseBodyDecodedSize = 10
        record.storedBytes = 20
        record.sni = "h.example"
        record.tlsVersion = "TLSv1.3"
        record.bytesUp = 5
        record.resentFrom = "abc"
        record.rule = "no ads"
        let saved = try traffic.insert([record])
        var expected = record
        expected.id = saved.first?.id
        #expect(try traffic.find(requestID: record.requestID) == expected)
        // The writer's path (one cached statement) stores the same.
        var second = record
        second.requestID = "second"
        _ = try await traffic.save([second, second], keeping: .init(maxExchanges: 100, maxBytes: .max), size: nil)
        let read = try traffic.find(requestID: "second")
        second.id = read?.id
        #expect(read == second)
        #expect(try traffic.count() == 2)
        // Empty text and an empty blob stay empty (not NULL), and non-ASCII text is kept, on both paths.
        var edge = record
        edge.requestID = "edge-grdb"
        edge.reason = ""
        edge.responseBody = Data()
        edge.path = "/日本?q=🚀"
        _ = try traffic.insert([edge])
        var raw = edge
        raw.requestID = "edge-raw"
        _ = try await traffic.save([raw], keeping: .init(maxExchanges: 100, maxBytes: .max), size: nil)
        let grdbRow = try traffic.find(requestID: "edge-grdb")
        let rawRow = try traffic.find(requestID: "edge-raw")
        #expect(rawRow?.reason == "" && rawRow?.responseBody == Data() && rawRow?.path == "/日本?q=🚀")
        raw.id = rawRow?.id
        #expect(rawRow == raw)
        #expect(grdbRow?.responseBody == rawRow?.responseBody)
        let types = try await traffic.database.pool.read { db in
            try String.fetchAll(
                db, sql: "SELECT typeof(response_body) || typeof(reason) FROM exchanges WHERE request_id IN ('edge-grdb', 'edge-raw')")
        }
        #expect(types == ["blobtext", "blobtext"])
    }
}

@Suite struct DatabaseDateTextTests {
    @Test func writesWhatGRDBWrites() {
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_800_000_000.25), Date(timeIntervalSince1970: 951_782_400.999),
            Date(timeIntervalSince1970: 4_102_444_799.9994), Date(timeIntervalSince1970: 1_709_164_800.0005),
        ]
        for _ in 0..<2000 { dates.append(Date(timeIntervalSince1970: Double.random(in: 0...4_102_444_800))) }
        for date in dates {
            let grdb = String.fromDatabaseValue(date.databaseValue)
            #expect(DatabaseDateText.string(date) == grdb, "\(date.timeIntervalSince1970)")
        }
    }
}

@Suite struct BreakpointRepositoryTests {
    @Test func theFirstResolutionWinsAndTheOutcomeIsRecorded() throws {
        let store = try CaptureStoreTests.Store()
        let repository = BreakpointRepository(database: store.database)
        let held = try repository.pause(
            BreakpointEvent(
                kind: .request, requestID: "r1", method: "GET", url: "http://a.test/", rawHTTPInitial: Data("GET / HTTP/1.1\r\n\r\n".utf8),
                tunnelPID: 42))
        let id = try #require(held.id)
        #expect(try repository.held().map(\.id) == [id])
        #expect(try repository.request(id: id, .edit, raw: Data("x".utf8)) == .claimed)
        // A second asker (a person, or the timeout) loses and sees why.
        guard case let .lost(now) = try repository.request(id: id, .timeout) else {
            Issue.record("the second request won")
            return
        }
        #expect(now.requested == .edit && now.rawHTTPRequested == Data("x".utf8))
        // The tunnel refuses the edit: held again, open to a new request.
        try repository.withdraw(id: id)
        #expect(try repository.request(id: id, .abort) == .claimed)
        try repository.resolve(id: id, .aborted, final: nil)
        let done = try #require(try repository.find(id: id))
        #expect(done.outcome == .aborted && done.resumedAt != nil && done.outcome != nil)
        #expect(try repository.held().isEmpty)
        // Resolved stays resolved.
        try repository.resolve(id: id, .continued, final: Data("y".utf8))
        #expect(try repository.find(id: id)?.outcome == .aborted)
        guard case .lost = try repository.request(id: id, .continue) else {
            Issue.record("a resolved message was asked again")
            return
        }
        #expect(try repository.request(id: id + 100, .continue) == .notFound)
    }

    @Test func messagesOfAGoneTunnelAreAbandoned() throws {
        let store = try CaptureStoreTests.Store()
        let repository = BreakpointRepository(database: store.database)
        for (pid, name) in [(Int32(1), "alive"), (Int32(2), "gone")] {
            _ = try repository.pause(
                BreakpointEvent(
                    kind: .response, requestID: name, method: "GET", url: "http://a.test/", rawHTTPInitial: Data(), tunnelPID: pid))
        }
        #expect(try repository.abandon(unless: { $0 == 1 }) == 1)
        #expect(try repository.held().map(\.requestID) == ["alive"])
        #expect(try repository.recent(limit: 10).first { $0.requestID == "gone" }?.outcome == .abandoned)
    }
}
