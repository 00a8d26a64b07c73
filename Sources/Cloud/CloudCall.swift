import AsyncHTTPClient
import BusymateShared
import Foundation
import NIOCore
import NIOPosix

/// The pairing's calls to the account's API, made by a child of the
/// supervisor that has given up root first (`busymate-tunnel --cloud-call`):
/// the root process parses no network input. The child reads one request
/// (JSON) on stdin and writes one line on stdout, which the supervisor
/// checks character by character (`CloudCallResult`).
public enum CloudCall {
    public typealias Request = CloudCallRequest

    /// The child's whole run: stdin to one line on stdout.
    public static func main() async -> Int32 {
        let input = FileHandle.standardInput.readData(ofLength: 64 << 10)
        let line: String
        do {
            let request = try JSONDecoder().decode(Request.self, from: input)
            line = await perform(request).line
        } catch {
            line = CloudCallResult.failed("the pairing request was not understood").line
        }
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
        return 0
    }

    public static func perform(_ request: Request) async -> CloudCallResult {
        let endpoint: CloudEndpoint
        do {
            endpoint = try CloudEndpoint(api: request.api, anonKey: request.anonKey)
        } catch {
            return .failed(error.description)
        }
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(10), read: .seconds(30)))
        configuration.httpVersion = .automatic
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let result: CloudCallResult
        switch request.action {
        case .claim: result = await claim(request, endpoint, client)
        case .unpair: result = await unpair(request, endpoint, client)
        }
        try? await client.shutdown()
        return result
    }

    static func claim(_ request: Request, _ endpoint: CloudEndpoint, _ client: HTTPClient) async -> CloudCallResult {
        var body: [String: Any] = ["action": "claim", "code": request.code ?? "", "device_uuid": request.deviceUUID]
        body["name"] = request.name
        body["model"] = request.model
        body["os_version"] = request.osVersion
        // The seed's `setup`: how this device captures.
        body["setup"] = ["platform": "linux", "app": "busymate", "version": BusymateVersion.current]
        let response: CloudResponse
        do {
            response = try await post(endpoint.url("/functions/v1/device-pair"), body, bearer: endpoint.anonKey, endpoint, client)
        } catch {
            return .failed("cannot reach \(endpoint.host): \(CloudError.describe(error))")
        }
        guard (200..<300).contains(response.status) else {
            return .failed("the server refused the pairing (HTTP \(response.status)\(response.errorMessage.map { ": \($0)" } ?? ""))")
        }
        guard let json = response.json, let token = json["token"] as? String else {
            return .failed("the server's answer carries no token")
        }
        guard DeviceToken.isWellFormed(token) else { return .failed("the server's token is not a JWT") }
        if let problem = DeviceToken.problem(with: token, deviceUUID: request.deviceUUID) {
            return .failed("the server's token cannot serve: \(problem)")
        }
        let jti = (json["jti"] as? String) ?? ""
        guard CloudCallResult.isWord(jti) else { return .failed("the server's token id (jti) is not an identifier") }
        guard let exp = (try? DeviceToken.claims(of: token))?.expiresAt else { return .failed("the token has no expiry") }
        return .claimed(token: token, jti: jti, expires: Int64(exp.timeIntervalSince1970))
    }

    static func unpair(_ request: Request, _ endpoint: CloudEndpoint, _ client: HTTPClient) async -> CloudCallResult {
        let response: CloudResponse
        do {
            response = try await post(
                endpoint.url("/functions/v1/device-pair"), ["action": "unpair", "device_uuid": request.deviceUUID],
                bearer: request.token ?? endpoint.anonKey, endpoint, client)
        } catch {
            return .failed("cannot reach \(endpoint.host): \(CloudError.describe(error))")
        }
        // A token the server already revoked is as good as unpaired.
        guard (200..<300).contains(response.status) || response.status == 401 || response.status == 404 else {
            return .failed("the server refused (HTTP \(response.status)\(response.errorMessage.map { ": \($0)" } ?? ""))")
        }
        return .done
    }

    static func post(_ url: String, _ body: [String: Any], bearer: String, _ endpoint: CloudEndpoint, _ client: HTTPClient) async throws
        -> CloudResponse
    {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "apikey", value: endpoint.anonKey)
        request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(data: try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])))
        return try await CloudResponse.execute(request, on: client, timeout: .seconds(30))
    }
}
