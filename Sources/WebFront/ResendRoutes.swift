import BusymateShared
import CaptureStore
import Foundation
import Hummingbird
import ProxyClient

/// Edit and replay, compose: the request goes through the tunnel (so it is
/// captured), a resent one naming its origin, as `busymate resend` does.
struct ResendRoutes<Context: RequestContext> {
    let reader: CaptureReader

    func register(on router: Router<Context>) {
        router.post("/api/exchanges/:id/resend") { request, context in
            guard let id = context.parameters.get("id", as: Int64.self) else { return WebJSON.error(.badRequest, "not an exchange id") }
            // Nothing, {} or the changes; anything else is refused, not resent as it was.
            guard let sent = try await WebJSON.optionalBody(request) else { return WebJSON.error(.badRequest, "the body is not JSON") }
            let changes = sent ?? JSONNode(.object([]))
            if let refused = WebJSON.unknownKey(changes, allowed: Self.requestKeys, in: "a resend's edit") { return refused }
            let found = try await reader.read { repos -> (ExchangeRecord, Data)? in
                guard let record = try repos.traffic.find(id: id) else { return nil }
                return (record, try repos.bodies.body(of: record, .request) ?? Data())
            }
            guard let (original, body) = found else { return WebJSON.error(.notFound, "no exchange \(id)") }
            guard original.tlsMode != .passthrough, original.method != "CONNECT", !original.method.isEmpty else {
                return WebJSON.error(
                    .conflict, "exchange \(id) has no HTTP request to send again (a tunnel, or a request that never parsed)")
            }
            var outgoing = OutgoingRequest(original, body: body)
            if let problem = Self.apply(changes, to: &outgoing) { return WebJSON.error(.unprocessableContent, problem) }
            if original.requestBodyTruncated && changes["body"] == nil {
                return WebJSON.error(.conflict, "exchange \(id)'s request body was not stored whole; send one with the edit")
            }
            return try await send(outgoing, resentFrom: original)
        }
        router.post("/api/compose/curl") { request, _ in try await Self.curl(request) }
        router.post("/api/compose") { request, _ in
            guard let changes = try await WebJSON.body(request), changes["url"] != nil else {
                return WebJSON.error(
                    .badRequest, #"expected {"method": "GET", "url": "https://…", "headers": [["Name", "value"]], "body": "…"}"#)
            }
            if let refused = WebJSON.unknownKey(changes, allowed: Self.requestKeys, in: "a composed request") { return refused }
            var outgoing = OutgoingRequest(method: "GET", url: "", headers: [("Accept", "*/*")], body: Data())
            if let problem = Self.apply(changes, to: &outgoing) { return WebJSON.error(.unprocessableContent, problem) }
            return try await send(outgoing, resentFrom: nil)
        }
    }

    static var requestKeys: [String] { ["method", "url", "headers", "body"] }

    /// `POST /api/compose/curl` with `{"command": "curl …"}`: the request it
    /// describes, for the composer to fill (nothing is sent).
    static func curl(_ request: Request) async throws -> Response {
        guard let sent = try await WebJSON.body(request, limit: 1 << 20), case let .string(command)? = sent["command"]?.value else {
            return WebJSON.error(.badRequest, #"expected {"command": "curl …"}"#)
        }
        if let refused = WebJSON.unknownKey(sent, allowed: ["command"], in: "a curl import") { return refused }
        let parsed: OutgoingRequest
        do {
            parsed = try CurlImport.parse(command)
        } catch {
            return WebJSON.error(.unprocessableContent, error.description)
        }
        return WebJSON.ok([
            ("method", ExchangeJSON.string(parsed.method)), ("url", ExchangeJSON.string(parsed.url)),
            (
                "headers",
                ExchangeJSON.array(parsed.headers.map { ExchangeJSON.array([ExchangeJSON.string($0.0), ExchangeJSON.string($0.1)]) })
            ),
            ("body", ExchangeJSON.string(String(decoding: parsed.body, as: UTF8.self))),
        ])
    }

    /// `method`, `url`, `headers` (all of them, in order) and `body` (text)
    /// from the page's JSON; the problem with them, or nil.
    static func apply(_ changes: JSONNode, to request: inout OutgoingRequest) -> String? {
        if case let .string(method)? = changes["method"]?.value {
            guard !method.isEmpty, method.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "-") }) else {
                return "\"\(method)\" is not a method name"
            }
            request.method = method.uppercased()
        }
        if case let .string(url)? = changes["url"]?.value {
            guard OutgoingRequest.isAbsoluteHTTP(url) else { return "\(url): give an absolute http:// or https:// URL" }
            request.url = url
        }
        if case let .array(items)? = changes["headers"]?.value {
            var headers: [(String, String)] = []
            for item in items {
                guard case let .array(pair) = item.value, pair.count == 2, case let .string(name) = pair[0].value,
                    case let .string(value) = pair[1].value
                else {
                    return "headers are [name, value] pairs"
                }
                guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_!#$%&'*+.^`|~".contains($0)) })
                else {
                    return "\"\(name)\" is not a header name"
                }
                guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                    return "the value of \(name) holds a line break"
                }
                headers.append((name, value))
            }
            // Framing is recomputed from the body as sent.
            request.headers = headers.filter { !["content-length", "transfer-encoding"].contains($0.0.lowercased()) }
        }
        if case let .string(body)? = changes["body"]?.value { request.body = Data(body.utf8) }
        return nil
    }

    func send(_ request: OutgoingRequest, resentFrom original: ExchangeRecord?) async throws -> Response {
        let paths = reader.paths
        do {
            let proxy = try OutgoingRequest.proxyAddress(paths)
            let record = try request.record(requestID: original?.requestID ?? "")
            let answer = try await ResendClient.send(
                record, body: request.body, resentFrom: original?.requestID, proxy: proxy, trusting: paths.caPEM)
            return WebJSON.ok([
                ("status", ExchangeJSON.number(answer.status)), ("reason", ExchangeJSON.string(answer.reason)),
                ("response_size", ExchangeJSON.number(answer.bodyBytes)),
            ])
        } catch let error as ProxyClientError {
            return WebJSON.error(.badGateway, error.description)
        } catch {
            return WebJSON.error(.badGateway, "sending through the proxy failed: \(error)")
        }
    }
}
