import AsyncHTTPClient
import BusymateShared
import Foundation
import NIOCore

/// Where a sink reads its configuration: the device token's mirror (the
/// account's PostgREST) or the team database's mirror (PostgreSQL).
public enum SinkSource: Sendable {
    case postgrest(token: URL)
    case postgres(config: URL)

    public var name: String {
        switch self {
        case .postgrest: return "postgrest"
        case .postgres: return "postgres"
        }
    }

    /// What the configuration file says now.
    enum Loaded {
        /// Not configured: the sink is off.
        case off(String)
        /// Configured, but it cannot serve (an expired token, a bad URL).
        case problem(String)
        case ready(SinkConfig)
    }

    func load(client: HTTPClient, eventLoop: any EventLoop, timeout: TimeAmount) -> Loaded {
        switch self {
        case let .postgrest(url):
            let token: DeviceToken?
            do {
                token = try DeviceToken.read(url)
            } catch {
                return .problem("\(error)")
            }
            guard let token else { return .off("not paired (busymate pair)") }
            if let problem = DeviceToken.problem(with: token.token, deviceUUID: token.deviceUUID) { return .problem(problem) }
            let endpoint: CloudEndpoint
            do {
                endpoint = try CloudEndpoint(token)
            } catch {
                return .problem(error.description)
            }
            // The account: the token's subject on that API (a re-pairing to it resumes).
            let subject = ((try? DeviceToken.claims(of: token.token))?.subject) ?? token.deviceUUID
            return .ready(
                SinkConfig(
                    deviceUUID: token.deviceUUID, account: "\(endpoint.host)/\(subject)", since: token.pairedAt, credential: token.token,
                    target: PostgRESTTarget(endpoint: endpoint, client: client, token: token.token, timeout: timeout),
                    identity: token.jti))
        case let .postgres(url):
            let config: TeamDatabase?
            do {
                config = try TeamDatabase.read(url)
            } catch {
                return .problem("\(error)")
            }
            guard let config else { return .off("no team database (busymate cloud postgres URL)") }
            let address: TeamDatabase.Address
            do {
                address = try TeamDatabase.Address(config.url)
            } catch {
                return .problem(error.description)
            }
            return .ready(
                SinkConfig(
                    deviceUUID: config.deviceUUID, account: address.redacted, since: config.setAt, credential: config.url,
                    target: PostgresTarget(address: address, eventLoop: eventLoop), identity: address.redacted))
        }
    }
}

/// A loaded configuration: whose rows, to which account, through what.
struct SinkConfig: Sendable {
    var deviceUUID: String
    /// The cursor's owner: the same account resumes, another starts anew.
    var account: String
    /// When it was paired (set): rows that started since go to it.
    var since: Date
    /// What a 401 sticks to: nothing is sent with it again until it changes.
    var credential: String
    var target: any SinkTarget
    /// For `device_status` reports: one per configuration and mode.
    var identity: String
}
