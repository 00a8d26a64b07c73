import BusymateShared
import CaptureStore
import Foundation
import NIOHTTP1
import Testing

@testable import Cloud

@Suite struct PushOutcomeTests {
    func response(_ status: Int, _ body: String = "", headers: [(String, String)] = []) -> CloudResponse {
        CloudResponse(status: status, headers: HTTPHeaders(headers), body: Data(body.utf8))
    }

    @Test func eachAnswerLeadsWhereTheIssueSays() {
        #expect(PostgRESTTarget.outcome(response(201)) == .accepted)
        #expect(PostgRESTTarget.outcome(response(413, "Request Entity Too Large")) == .tooLarge)
        if case let .unauthorized(why) = PostgRESTTarget.outcome(response(401, #"{"code":"PGRST303","message":"JWT expired"}"#)) {
            #expect(why.contains("expired") && why.contains("PGRST303"))
        } else {
            Issue.record("401 is not unauthorized")
        }
        if case .unauthorized = PostgRESTTarget.outcome(response(401, #"{"code":"PGRST301"}"#)) {} else { Issue.record("PGRST301") }
        #expect(PostgRESTTarget.outcome(response(503, headers: [("Retry-After", "7")])) == .retry("HTTP 503", after: 7))
        #expect(PostgRESTTarget.outcome(response(429, headers: [("Retry-After", "99999")])) == .retry("HTTP 429", after: 300))
        if case .refused = PostgRESTTarget.outcome(
            response(403, #"{"code":"42501","message":"new row violates row-level security policy"}"#))
        {
        } else {
            Issue.record("403 is not refused")
        }
        if case .retry = PostgRESTTarget.outcome(response(500, "\u{0}\u{ff}garbage")) {} else { Issue.record("garbage 500") }
        // One row's data (a ts outside every partition): found by halving. A schema problem is not a row's.
        if case .rowRejected = PostgRESTTarget.outcome(response(400, #"{"code":"23514","message":"no partition of relation"}"#)) {
        } else {
            Issue.record("23514 is not a row's fault")
        }
        if case .refused = PostgRESTTarget.outcome(response(400, #"{"code":"PGRST204","message":"Could not find the 'x' column"}"#)) {
        } else {
            Issue.record("PGRST204 is not refused")
        }
    }

    @Test func anErrorsTextNeverCarriesControlCharacters() {
        let r = response(400, #"{"message":"bad\u001b[31m\nthing"}"#)
        #expect(r.errorMessage == "bad[31mthing")
    }

    @Test func backoffGrowsToItsCapWithJitter() {
        var backoff = SinkBackoff(base: 1, cap: 60)
        let delays = (0..<10).map { _ in backoff.next() }
        #expect(delays[0] >= 0.5 && delays[0] <= 1)
        #expect(delays[3] >= 4 && delays[3] <= 8)
        #expect(delays.allSatisfy { $0 <= 60 })
        #expect(delays[9] >= 30)
        #expect(backoff.next(at: 120) == 120)
        backoff.reset()
        #expect(backoff.next() <= 1)
    }

    @Test func aBatchStaysUnderItsBytesAndTakesOneRowAtLeast() {
        let rows = (0..<10).map { EntryRows.Encoded(id: Int64($0), requestID: "r\($0)", json: String(repeating: "x", count: 100)) }
        let batch = EntryRows.batch(rows, maxBytes: 350)
        #expect(batch.rows.count == 3 && batch.body.utf8.count <= 350)
        #expect(EntryRows.batch(rows, maxBytes: 10).rows.count == 1)
        let all = EntryRows.batch(rows, maxBytes: 1 << 20)
        #expect(all.rows.count == 10)
        #expect(
            (try? JSONSerialization.jsonObject(
                with: Data(EntryRows.batch([EntryRows.Encoded(id: 1, requestID: "a", json: "{}")], maxBytes: 10).body.utf8))) != nil)
    }

    @Test func anEndpointIsHTTPSOrThisMachine() {
        #expect((try? CloudEndpoint(api: "https://p.supabase.co/", anonKey: "k.e-y_1"))?.base == "https://p.supabase.co")
        #expect((try? CloudEndpoint(api: "http://127.0.0.1:5432", anonKey: "k")) != nil)
        #expect((try? CloudEndpoint(api: "http://p.supabase.co", anonKey: "k")) == nil)
        #expect((try? CloudEndpoint(api: "https://p.supabase.co", anonKey: "k\r\nX: y")) == nil)
        #expect((try? CloudEndpoint(api: "https://user@p.supabase.co", anonKey: "k")) == nil)
        #expect((try? CloudEndpoint(api: "ftp://p", anonKey: "k")) == nil)
    }
}
