import BusymateShared
import CaptureStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Answers of the API: compact JSON written from `JSONNode`s, so the shape
/// is the documented one (docs/web-api.md).
enum WebJSON {
    static func response(_ node: JSONNode, status: HTTPResponse.Status = .ok) -> Response {
        let text = JSONWriter.compact(node)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String, _ more: [ExchangeJSON.Member] = []) -> Response {
        response(ExchangeJSON.object([("error", ExchangeJSON.string(message))] + more), status: status)
    }

    static func ok(_ more: [ExchangeJSON.Member] = []) -> Response {
        response(ExchangeJSON.object([("ok", ExchangeJSON.bool(true))] + more))
    }

    /// A request's JSON body (at most `limit` bytes), or nil when it is none.
    static func body(_ request: Request, limit: Int = 1 << 20) async throws -> JSONNode? {
        let buffer = try await request.body.collect(upTo: limit)
        return try? JSONParser.parse(Array(buffer.readableBytesView))
    }

    /// An empty body, or its JSON; nil when it is not JSON.
    static func optionalBody(_ request: Request, limit: Int = 1 << 20) async throws -> JSONNode?? {
        let buffer = try await request.body.collect(upTo: limit)
        if buffer.readableBytesView.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) { return .some(nil) }
        guard let node = try? JSONParser.parse(Array(buffer.readableBytesView)) else { return nil }
        return .some(node)
    }

    /// A body key the route does not read is refused, named: a misspelled
    /// one must not be answered 200 and then ignored.
    static func unknownKey(_ node: JSONNode, allowed: [String], in what: String) -> Response? {
        guard case let .object(members) = node.value, let unknown = members.first(where: { !allowed.contains($0.key) })?.key else {
            return nil
        }
        return refusedKey(unknown, in: what, allowed: allowed)
    }

    static func refusedKey(_ key: String, in what: String, allowed: [String]) -> Response {
        error(
            .badRequest, "unknown key \"\(key)\" in \(what) (it takes \(allowed.sorted().joined(separator: ", ")))",
            [("key", ExchangeJSON.string(key))])
    }

    static func text(_ text: String, type: String = "text/plain; charset=utf-8") -> Response {
        Response(status: .ok, headers: [.contentType: type], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// `application/x-www-form-urlencoded` query items: `+` is a space, then
/// percent-decoding (what browsers' URLSearchParams writes).
struct QueryItems {
    private var items: [(String, String)] = []

    init(_ query: String?) {
        guard let query else { return }
        for part in query.split(separator: "&", omittingEmptySubsequences: true) {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let spaced = s.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            items.append((decode(pair[0]), pair.count > 1 ? decode(pair[1]) : ""))
        }
    }

    subscript(_ name: String) -> String? { items.first { $0.0 == name }?.1 }

    func int(_ name: String) -> Int? { self[name].flatMap { Int($0) } }

    func flag(_ name: String) -> Bool { self[name].map { $0 == "1" || $0 == "true" || $0.isEmpty } ?? false }
}
