import Crypto
import Foundation

/// A named device's enrolment link (`devices.list[].enrolment`): one
/// device opens it, and its address is admitted and bound to the name.
/// Only the token's SHA-256 is kept: `settings.json` is readable by
/// the group, and the link is printed once.
extension AppSettings {
    public struct Enrolment: Sendable, Equatable {
        public var tokenSHA256: String
        public var expires: Date
        public var revoked = false
        /// The address that opened it first: only it may open it again.
        public var redeemedBy: String?
        public var redeemedAt: Date?

        public init(tokenSHA256: String, expires: Date) {
            self.tokenSHA256 = tokenSHA256
            self.expires = expires
        }

        /// How long a link stays open when nobody says otherwise.
        public static let linkLifetime: Double = 86_400
        /// How long an enrolled device stays admitted after its last
        /// traffic (the seed's whitelist TTL, renewed while in use).
        public static let admission: Double = 86_400
        /// The tunnel writes a renewal when the grant it would extend has
        /// less than `admission - renewalStep` left: at most once an hour.
        public static let renewalStep: Double = 3_600

        /// A new token: 128 random bits, URL-safe base64 without padding.
        public static func newToken() -> String {
            var generator = SystemRandomNumberGenerator()
            let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }

        public static func digest(_ token: String) -> String {
            SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
        }

        /// A token as links carry it (what `newToken` makes); anything
        /// else is not looked up.
        public static func isWellFormed(_ token: String) -> Bool {
            (16...64).contains(token.utf8.count)
                && token.utf8.allSatisfy {
                    (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                        || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                }
        }

        /// What opening the link from `client` at `now` comes to.
        public enum Verdict: Equatable, Sendable {
            case admit(first: Bool)
            case revoked
            case expired
            case usedElsewhere(String)
        }

        public func verdict(client: String, now: Date = Date()) -> Verdict {
            if revoked { return .revoked }
            // The device it enrolled may open it again after it expired (admitted again after a long absence).
            if let by = redeemedBy {
                return IPAddressText.host(by) == IPAddressText.host(client) ? .admit(first: false) : .usedElsewhere(by)
            }
            if expires <= now { return .expired }
            return .admit(first: true)
        }

        /// As the readiness card says it.
        public func state(now: Date = Date()) -> String {
            if revoked { return "revoked" }
            if let by = redeemedBy { return "enrolled from \(by)" }
            return expires <= now ? "link expired" : "link not opened yet"
        }

        public var node: JSONNode { JSONNode(.object(members.compactMap { key, node in node.map { (key, $0) } })) }

        /// Every key it owns, nil for one to leave out.
        var members: [(String, JSONNode?)] {
            [
                ("token_sha256", JSONNode(.string(tokenSHA256))), ("expires", JSONNode(.string(Self.text(expires)))),
                ("revoked", revoked ? JSONNode(.bool(true)) : nil), ("redeemed_by", redeemedBy.map { JSONNode(.string($0)) }),
                ("redeemed_at", redeemedAt.map { JSONNode(.string(Self.text($0))) }),
            ]
        }

        static func text(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
    }

    /// The device the token opens, if any.
    public func enrolling(token: String) -> NamedDevice? {
        guard Enrolment.isWellFormed(token) else { return nil }
        let digest = Enrolment.digest(token)
        return devices.list.first { $0.enrolment?.tokenSHA256 == digest }
    }
}

extension AppSettings.NamedDevice {
    /// As `devices.list[]` has it.
    public var node: JSONNode {
        var members: [(key: String, node: JSONNode)] = [("name", JSONNode(.string(name)))]
        if let port { members.append(("port", JSONNode(.number(String(port))))) }
        if let address { members.append(("address", JSONNode(.string(address)))) }
        if let enrolment { members.append(("enrolment", enrolment.node)) }
        return JSONNode(.object(members))
    }
}

extension AppSettings.Reader {
    mutating func enrolment(_ node: JSONNode, path: String) throws(SettingsError) -> AppSettings.Enrolment {
        try object(node, path: "devices.list[].enrolment")
        guard let digestNode = node["token_sha256"], let expiresNode = node["expires"] else {
            throw SettingsError(message: "needs \"token_sha256\" and \"expires\"", position: node.position, keyPath: path)
        }
        let digest = try string(digestNode, path: "\(path).token_sha256")
        guard digest.utf8.count == 64, digest.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
            throw SettingsError(message: "expected 64 lowercase hex digits", position: digestNode.position, keyPath: "\(path).token_sha256")
        }
        var enrolment = AppSettings.Enrolment(tokenSHA256: digest, expires: try date(expiresNode, path: "\(path).expires"))
        if let revoked = node["revoked"] {
            guard case let .bool(value) = revoked.value else {
                throw SettingsError(
                    message: "expected true or false, found \(revoked.value.typeName)", position: revoked.position,
                    keyPath: "\(path).revoked")
            }
            enrolment.revoked = value
        }
        if let by = node["redeemed_by"], by.value != .null {
            let text = try string(by, path: "\(path).redeemed_by")
            guard IPAddressText.isLiteral(text) else {
                throw SettingsError(message: "\"\(text)\" is not an IP address", position: by.position, keyPath: "\(path).redeemed_by")
            }
            enrolment.redeemedBy = text
        }
        if let at = node["redeemed_at"], at.value != .null { enrolment.redeemedAt = try date(at, path: "\(path).redeemed_at") }
        return enrolment
    }

    func date(_ node: JSONNode, path: String) throws(SettingsError) -> Date {
        let text = try string(node, path: path)
        guard let date = ISO8601DateFormatter().date(from: text) else {
            throw SettingsError(
                message: "\"\(text)\" is not a UTC time such as \"2026-11-25T10:00:00Z\"", position: node.position, keyPath: path)
        }
        return date
    }
}

extension AppSettings.Grant {
    /// As `access.grants[]` has it.
    public var node: JSONNode {
        JSONNode(.object([("address", JSONNode(.string(address))), ("until", JSONNode(.string(AppSettings.Enrolment.text(until))))]))
    }
}
