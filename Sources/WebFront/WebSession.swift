import Crypto
import Foundation

/// The page's cookie: an HMAC of the token, so it outlives a restart of
/// the web front and stops working when the token changes.
public struct WebSession: Sendable {
    public static let cookieName = "busymate_session"
    let token: String

    public init(token: String) { self.token = token }

    /// The cookie's value for this token.
    public var cookieValue: String {
        let mac = HMAC<SHA256>.authenticationCode(for: Data("busymate-web-session/1".utf8), using: SymmetricKey(data: Data(token.utf8)))
        return Data(mac).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `presented` is the token, in time that does not depend on
    /// where they differ.
    public func isToken(_ presented: String) -> Bool { Self.equal(presented, token) }

    public func isCookie(_ presented: String) -> Bool { Self.equal(presented, cookieValue) }

    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<x.count { diff |= x[i] ^ y[i] }
        return diff == 0
    }

    /// `Set-Cookie` for a login: the page's scripts cannot read it, and no
    /// other site's request carries it.
    public var setCookie: String {
        "\(Self.cookieName)=\(cookieValue); Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000"
    }

    public static let clearCookie = "\(cookieName)=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"

    /// The session cookie's value among a request's `Cookie` headers.
    public static func cookie(in headers: [String]) -> String? {
        for header in headers {
            for part in header.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces)
                guard let eq = pair.firstIndex(of: "="), pair[..<eq] == cookieName else { continue }
                return String(pair[pair.index(after: eq)...])
            }
        }
        return nil
    }
}
