import BusymateShared
import Foundation

/// The account's API and its anon key, checked before anything is sent:
/// https, or http to this machine only (a token never crosses a network in
/// clear); a key of token characters only.
public struct CloudEndpoint: Sendable, Equatable {
    public let base: String
    public let anonKey: String
    public let host: String

    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public init(api: String, anonKey: String) throws(Invalid) {
        guard let url = URL(string: api), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
            url.query == nil, url.fragment == nil, url.user == nil
        else {
            throw Invalid(description: "--api must be an https URL such as https://PROJECT.supabase.co")
        }
        let loopback = host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw Invalid(description: "--api must be https (plain http only to this machine), not \(scheme)://\(host)")
        }
        guard !anonKey.isEmpty, anonKey.utf8.count <= 4096,
            anonKey.utf8.allSatisfy({
                $0 == 0x2E || $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0)
                    || (0x61...0x7A).contains($0)
            })
        else {
            throw Invalid(description: "the anon key must be a token (letters, digits, '.', '-', '_')")
        }
        // The scheme as the checks above read it: `HTTPS://` must not become ws:// later.
        var base = scheme + api.drop { $0 != ":" }
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
        self.anonKey = anonKey
        self.host = host
    }

    public init(_ token: DeviceToken) throws(Invalid) {
        try self.init(api: token.api, anonKey: token.anonKey)
    }

    public func url(_ path: String) -> String { base + path }
}
