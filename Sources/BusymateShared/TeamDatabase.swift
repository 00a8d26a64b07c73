import Foundation

/// A team's own PostgreSQL (`busymate cloud postgres URL`): the supervisor's
/// private copy and its mirror for the tunnel, `cloud-postgres.json`, hold
/// this. Its `description` never shows the password.
public struct TeamDatabase: Codable, Sendable, Equatable, CustomStringConvertible {
    /// `postgres://USER:PASSWORD@HOST[:PORT]/DATABASE[?sslmode=disable|require|verify-full]`.
    public var url: String
    public var deviceUUID: String
    public var setAt: Date

    enum CodingKeys: String, CodingKey {
        case url
        case deviceUUID = "device_uuid"
        case setAt = "set_at"
    }

    public init(url: String, deviceUUID: String, setAt: Date) {
        self.url = url
        self.deviceUUID = deviceUUID
        self.setAt = setAt
    }

    public var description: String { (try? Address(url).redacted) ?? "a PostgreSQL URL" }

    public func encoded() throws -> Data { try DeviceToken.encoder.encode(self) }

    public static func read(_ url: URL) throws -> TeamDatabase? {
        try SecretFile.decode(TeamDatabase.self, from: url, decoder: DeviceToken.decoder)
    }

    /// The URL's parts, checked: postgres(ql)://, a user and a database;
    /// TLS unless `sslmode=disable`, which only this machine may use.
    public struct Address: Sendable, Equatable {
        public enum TLS: String, Sendable { case disable, require, verifyFull = "verify-full" }
        public var host: String
        public var port: Int
        public var user: String
        public var password: String?
        public var database: String
        public var tls: TLS

        public init(_ text: String) throws(DeviceToken.Problem) {
            guard text.utf8.count <= 2048, let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
                scheme == "postgres" || scheme == "postgresql"
            else {
                throw DeviceToken.Problem("a team database is a URL: postgres://USER:PASSWORD@HOST[:PORT]/DATABASE")
            }
            guard let host = url.host, !host.isEmpty else { throw DeviceToken.Problem("the URL names no host") }
            guard let user = url.user, !user.isEmpty else { throw DeviceToken.Problem("the URL names no user") }
            let database = String(url.path.drop { $0 == "/" })
            guard !database.isEmpty, !database.contains("/") else { throw DeviceToken.Problem("the URL names no database (…/DATABASE)") }
            let loopback = host == "localhost" || host.hasPrefix("127.") || host == "::1"
            let mode = url.queryItems?.first { $0.name == "sslmode" }?.value ?? (loopback ? "disable" : "verify-full")
            guard let tls = TLS(rawValue: mode) else {
                throw DeviceToken.Problem("sslmode is disable, require or verify-full, not \(mode)")
            }
            guard tls != .disable || loopback else {
                throw DeviceToken.Problem("sslmode=disable only to this machine: a password never crosses a network in clear")
            }
            guard url.queryItems?.allSatisfy({ $0.name == "sslmode" }) ?? true else {
                throw DeviceToken.Problem("the URL's only parameter is sslmode")
            }
            self.host = host
            port = url.port ?? 5432
            self.user = user
            password = url.password
            self.database = database
            self.tls = tls
        }

        /// For messages and status: no password.
        public var redacted: String { "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)" }
    }
}
