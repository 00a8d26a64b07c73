import AsyncHTTPClient
import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOPosix

/// The account's PostgREST (Supabase's `/rest/v1`), as seed 000's table
/// expects it: bulk inserts into `entries` that ignore rows already there,
/// and `device_status` upserts.
public struct PostgRESTTarget: SinkTarget {
    public let endpoint: CloudEndpoint
    let client: HTTPClient
    let token: String
    let timeout: TimeAmount

    public init(endpoint: CloudEndpoint, client: HTTPClient, token: String, timeout: TimeAmount = .seconds(30)) {
        self.endpoint = endpoint
        self.client = client
        self.token = token
        self.timeout = timeout
    }

    public var name: String { endpoint.host }

    public func close() async {}

    public func pushEntries(_ body: String) async -> PushOutcome {
        let url = endpoint.url("/rest/v1/entries?columns=\(EntryRows.columns)&on_conflict=request_id,ts")
        let response: CloudResponse
        do {
            response = try await post(url, body, prefer: "return=minimal, resolution=ignore-duplicates")
        } catch {
            return .retry(CloudError.describe(error), after: nil)
        }
        return Self.outcome(response)
    }

    /// The seed's `device_status` row, merged on `device_uuid`.
    public func upsertStatus(deviceUUID: String, online: Bool, vpnState: String) async -> PushOutcome {
        let row: [String: Any] = [
            "device_uuid": deviceUUID, "online": online, "last_heartbeat_at": DatabaseDateText.iso8601(Date()),
            "vpn_state": vpnState, "source": "tunnel",
        ]
        let body =
            (try? JSONSerialization.data(withJSONObject: [row], options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        do {
            let response = try await post(
                endpoint.url("/rest/v1/device_status?on_conflict=device_uuid"), body,
                prefer: "return=minimal, resolution=merge-duplicates")
            return Self.outcome(response)
        } catch {
            return .retry(CloudError.describe(error), after: nil)
        }
    }

    func post(_ url: String, _ body: String, prefer: String) async throws -> CloudResponse {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "apikey", value: endpoint.anonKey)
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Prefer", value: prefer)
        request.body = .bytes(ByteBuffer(string: body))
        return try await CloudResponse.execute(request, on: client, timeout: timeout)
    }

    static func outcome(_ response: CloudResponse) -> PushOutcome {
        let said = response.errorMessage.map { ": \($0)" } ?? ""
        let code = response.errorCode.map { " \($0)" } ?? ""
        switch response.status {
        case 200..<300: return .accepted
        case 413: return .tooLarge
        case 401:
            let why = response.errorCode == "PGRST303" ? "the token expired or is not valid yet" : "the token is not accepted"
            return .unauthorized("\(why) (HTTP 401\(code)\(said))")
        case 408, 425, 429, 500...599: return .retry("HTTP \(response.status)\(code)\(said)", after: response.retryAfter)
        // PostgreSQL's data (22) and integrity (23) classes: one row's fault, not the schema's.
        case 400 where (response.errorCode?.hasPrefix("22") ?? false) || (response.errorCode?.hasPrefix("23") ?? false):
            return .rowRejected("HTTP 400\(code)\(said)")
        case 400..<500: return .refused("HTTP \(response.status)\(code)\(said)")
        default: return .retry("unexpected HTTP \(response.status)", after: nil)
        }
    }
}
