import AsyncHTTPClient
import BusymateShared
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// A server's answer, its body read up to a cap (an error's text, a
/// claim's token: never a large document).
public struct CloudResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: Data

    public static let bodyCap = 256 << 10

    /// PostgREST's error code (`PGRST301`, `23505`, …) when the body is its error object.
    public var errorCode: String? { json?["code"] as? String }

    /// The server's own words, for a message: PostgREST's `message`, an
    /// edge function's `error` or `msg`, cut short and without control characters.
    public var errorMessage: String? {
        let text = (json?["message"] as? String) ?? (json?["error"] as? String) ?? (json?["msg"] as? String)
        return text.map(Self.printable)
    }

    public var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }

    /// Seconds from a `Retry-After` of seconds, capped at five minutes.
    public var retryAfter: Double? {
        headers.first(name: "retry-after").flatMap(Double.init).map { min(max($0, 0), 300) }
    }

    public static func printable(_ text: String) -> String { CloudCallResult.printable(text) }

    /// `request` through `client`, its body read whole up to the cap.
    public static func execute(_ request: HTTPClientRequest, on client: HTTPClient, timeout: TimeAmount) async throws -> CloudResponse {
        let response = try await client.execute(request, timeout: timeout)
        var buffer = ByteBuffer()
        for try await var part in response.body {
            if buffer.readableBytes < bodyCap { buffer.writeBuffer(&part) }
        }
        return CloudResponse(status: Int(response.status.code), headers: response.headers, body: Data(buffer: buffer))
    }
}
