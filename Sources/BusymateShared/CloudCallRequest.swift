import Foundation

/// What the supervisor asks of its `--cloud-call` child (`CloudCall`), as JSON on the child's stdin.
public struct CloudCallRequest: Codable, Sendable {
    public enum Action: String, Codable, Sendable { case claim, unpair }
    public var action: Action
    public var api: String
    public var anonKey: String
    public var deviceUUID: String
    public var code: String?
    public var name: String?
    public var model: String?
    public var osVersion: String?
    /// The device token, for `unpair`.
    public var token: String?

    public init(
        action: Action, api: String, anonKey: String, deviceUUID: String, code: String? = nil, name: String? = nil,
        model: String? = nil, osVersion: String? = nil, token: String? = nil
    ) {
        self.action = action
        self.api = api
        self.anonKey = anonKey
        self.deviceUUID = deviceUUID
        self.code = code
        self.name = name
        self.model = model
        self.osVersion = osVersion
        self.token = token
    }
}
