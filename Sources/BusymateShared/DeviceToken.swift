import Foundation

/// The device token a pairing claimed (seed 000's Keychain entry): the
/// supervisor's private copy and its mirror, `device-jwt.json`, hold this.
/// Its `description` never shows the token or the anon key.
public struct DeviceToken: Codable, Sendable, Equatable, CustomStringConvertible {
    public var token: String
    public var jti: String
    public var expiresAt: Date
    public var deviceUUID: String
    /// The account's API (`https://PROJECT.supabase.co`), and its anon key.
    public var api: String
    public var anonKey: String
    public var name: String?
    public var pairedAt: Date

    enum CodingKeys: String, CodingKey {
        case token, jti, name, api
        case expiresAt = "expires_at", deviceUUID = "device_uuid", anonKey = "anon_key", pairedAt = "paired_at"
    }

    public init(
        token: String, jti: String, expiresAt: Date, deviceUUID: String, api: String, anonKey: String, name: String?, pairedAt: Date
    ) {
        self.token = token
        self.jti = jti
        self.expiresAt = expiresAt
        self.deviceUUID = deviceUUID
        self.api = api
        self.anonKey = anonKey
        self.name = name
        self.pairedAt = pairedAt
    }

    public var description: String { "device token \(jti) for \(deviceUUID), expires \(expiresAt)" }

    public func encoded() throws -> Data { try Self.encoder.encode(self) }

    public static func decode(_ data: Data) throws -> DeviceToken { try decoder.decode(DeviceToken.self, from: data) }

    /// The keys are spelt out (snake case): no key strategy on top.
    static var encoder: JSONEncoder {
        let e = JSONEncoder()
        e.dateEncodingStrategy = .iso8601
        e.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return e
    }

    static var decoder: JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .iso8601
        return d
    }

    /// The file at `url`, or nil when there is none; a file that is there
    /// but unreadable throws (a half-written mirror is not "unpaired").
    public static func read(_ url: URL) throws -> DeviceToken? {
        try SecretFile.decode(DeviceToken.self, from: url, decoder: decoder)
    }

    public struct Problem: Error, CustomStringConvertible, Sendable, Equatable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// The JWT's claims a device checks. The signature is the server's to
    /// check: a device holds no key for it.
    public struct Claims: Sendable, Equatable {
        public var expiresAt: Date?
        public var userType: String?
        public var deviceUUID: String?
        public var subject: String?
        public var role: String?
    }

    /// The claims of `jwt` (three base64url parts), or why it is not one.
    public static func claims(of jwt: String) throws(Problem) -> Claims {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, jwt.utf8.count <= 16_384, let payload = base64URLDecode(parts[1]) else {
            throw Problem("the token is not a JWT")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: payload)) as? [String: Any] else {
            throw Problem("the token's claims are not a JSON object")
        }
        let metadata = object["app_metadata"] as? [String: Any]
        return Claims(
            expiresAt: (object["exp"] as? NSNumber).map { Date(timeIntervalSince1970: $0.doubleValue) },
            userType: metadata?["user_type"] as? String,
            deviceUUID: metadata?["device_uuid"] as? String,
            subject: object["sub"] as? String,
            role: object["role"] as? String)
    }

    /// Why `jwt` cannot serve as this appliance's device token, or nil.
    public static func problem(with jwt: String, deviceUUID: String, now: Date = Date()) -> String? {
        let claims: Claims
        do {
            claims = try Self.claims(of: jwt)
        } catch {
            return error.description
        }
        guard claims.userType == "device" else { return "the token is not a device token (app_metadata.user_type is not \"device\")" }
        guard claims.deviceUUID?.lowercased() == deviceUUID.lowercased() else {
            return "the token was issued to another device (app_metadata.device_uuid)"
        }
        guard let expiry = claims.expiresAt else { return "the token has no expiry (exp)" }
        guard expiry > now else { return "the token expired on \(DeviceToken.day(expiry))" }
        return nil
    }

    /// What the token says of the pairing now: checked claims first.
    public func state(now: Date = Date()) -> PairingState {
        if let problem = Self.problem(with: token, deviceUUID: deviceUUID, now: now) { return .rePairRequired(problem) }
        let expiry = (try? Self.claims(of: token).expiresAt) ?? nil
        let days = Int(((expiry ?? expiresAt).timeIntervalSince(now) / 86_400).rounded(.down))
        return .paired(expiresInDays: days)
    }

    static func day(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: date)
    }

    static func base64URLDecode(_ part: Substring) -> Data? {
        guard
            part.utf8.allSatisfy({
                $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            })
        else {
            return nil
        }
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.utf8.count % 4 != 0 { text += "=" }
        return Data(base64Encoded: text)
    }

    /// A token's characters as the claim's child hands it over: three
    /// base64url parts, nothing else.
    public static func isWellFormed(_ jwt: String) -> Bool {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && jwt.utf8.count <= 16_384 && !parts[0].isEmpty && !parts[1].isEmpty
            && jwt.utf8.allSatisfy {
                $0 == 0x2E || $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                    || (0x61...0x7A).contains($0)
            }
    }
}

/// Paired, unpaired, or paired with a token that no longer serves.
public enum PairingState: Sendable, Equatable, CustomStringConvertible {
    case unpaired
    case paired(expiresInDays: Int)
    case rePairRequired(String)

    /// Warned about this many days ahead.
    public static let warnDays = 30

    public var description: String {
        switch self {
        case .unpaired: return "not paired"
        case let .paired(days) where days < Self.warnDays: return "paired, expires in \(days) day\(days == 1 ? "" : "s"): re-pair soon"
        case let .paired(days): return "paired, expires in \(days) days"
        case let .rePairRequired(why): return "re-pair required: \(why)"
        }
    }

    /// Short, for the STATUS= pill.
    public var pill: String? {
        switch self {
        case .unpaired: return nil
        case let .paired(days) where days < Self.warnDays: return "paired (expires in \(days) d)"
        case .paired: return "paired"
        case .rePairRequired: return "re-pair required"
        }
    }
}
