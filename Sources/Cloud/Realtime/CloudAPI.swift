import AsyncHTTPClient
import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The account's REST calls besides the sink's: the seed's
/// `breakpoint_events` rows and `effective_settings_for_device`, with the
/// device token.
struct CloudAPI: Sendable {
    let endpoint: CloudEndpoint
    let deviceUUID: String
    let token: String
    let client: HTTPClient
    let timeout: TimeAmount

    /// A held message's row as the seed writes it at the pause; a message
    /// already resolved goes with its resolution.
    func insert(_ event: BreakpointEvent) async throws {
        var row: [String: Any] = [
            "device_uuid": deviceUUID, "kind": event.kind.rawValue, "request_id": event.requestID,
            "raw_http_initial": Self.text(event.rawHTTPInitial), "paused_at": DatabaseDateText.iso8601(event.pausedAt),
        ]
        if let outcome = event.outcome {
            row.merge(Self.resolution(event, outcome)) { $1 }
        }
        try await send(.POST, "/rest/v1/breakpoint_events", body: PhoenixMessage.json([row]), prefer: "return=minimal")
    }

    /// The resolution, on the row still open for that message (none: nothing changes).
    func resolve(_ event: BreakpointEvent) async throws {
        guard let outcome = event.outcome else { return }
        let request = event.requestID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? event.requestID
        let filter = "device_uuid=eq.\(deviceUUID)&request_id=eq.\(request)&kind=eq.\(event.kind.rawValue)&resumed_at=is.null"
        try await send(
            .PATCH, "/rest/v1/breakpoint_events?\(filter)", body: PhoenixMessage.json(Self.resolution(event, outcome)),
            prefer: "return=minimal")
    }

    /// `effective_settings_for_device`: the account's settings merged for this device.
    func effectiveSettings() async throws -> Data {
        try await send(
            .POST, "/rest/v1/rpc/effective_settings_for_device", body: PhoenixMessage.json(["target_uuid": deviceUUID]), prefer: nil
        ).body
    }

    @discardableResult
    private func send(_ method: HTTPMethod, _ path: String, body: String, prefer: String?) async throws -> CloudResponse {
        var request = HTTPClientRequest(url: endpoint.url(path))
        request.method = method
        request.headers.add(name: "apikey", value: endpoint.anonKey)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        if let prefer { request.headers.add(name: "Prefer", value: prefer) }
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await CloudResponse.execute(request, on: client, timeout: timeout)
        guard (200..<300).contains(response.status) else {
            let code = response.errorCode.map { " \($0)" } ?? ""
            throw CloudAPIError(
                status: response.status, description: "HTTP \(response.status)\(code)\(response.errorMessage.map { ": \($0)" } ?? "")")
        }
        return response
    }

    private static func resolution(_ event: BreakpointEvent, _ outcome: BreakpointEvent.Outcome) -> [String: Any] {
        var row: [String: Any] = ["outcome": outcome.rawValue, "resumed_at": DatabaseDateText.iso8601(event.resumedAt ?? Date())]
        if let final = event.rawHTTPFinal { row["raw_http_final"] = text(final) }
        return row
    }

    /// The table's columns are text: a message's bytes as UTF-8 (what is
    /// not UTF-8 is replaced, and NUL, which PostgreSQL's text refuses),
    /// at most 1 MiB of them.
    static func text(_ data: Data) -> String {
        String(decoding: data.prefix(1 << 20), as: UTF8.self).replacingOccurrences(of: "\u{0}", with: "\u{FFFD}")
    }
}

struct CloudAPIError: Error, CustomStringConvertible {
    var status: Int
    var description: String

    /// The server will not take this one row, however often it is sent
    /// (a 4xx other than the credential's, a rate limit or a timeout).
    var refusesTheRow: Bool { (400..<500).contains(status) && ![401, 403, 408, 429].contains(status) }
}
