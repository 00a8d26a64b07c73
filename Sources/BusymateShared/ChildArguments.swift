import Foundation

/// The command line the supervisor gives a child (`busymate-tunnel`,
/// `busymate-web`): `[--group DIR] [--user USER] [--group-name GROUP]`.
public struct ChildArguments: Sendable, Equatable {
    public var group: String?
    public var identity = TunnelIdentity.default

    public init(group: String? = nil, identity: TunnelIdentity = .default) {
        self.group = group
        self.identity = identity
    }

    /// The arguments after the program's name, or what is wrong with them.
    public static func parse<Arguments: Sequence>(_ arguments: Arguments) -> Result<ChildArguments, ParseError>
    where Arguments.Element == String {
        var parsed = ChildArguments()
        var rest = Array(arguments)[...]
        while let argument = rest.popFirst() {
            if argument == "--group" {
                guard let value = rest.popFirst() else { return .failure(ParseError(message: "--group needs a directory")) }
                parsed.group = value
            } else if argument.hasPrefix("--group=") {
                parsed.group = String(argument.dropFirst("--group=".count))
            } else if argument == "--user" || argument == "--group-name" {
                guard let name = rest.popFirst(), TunnelIdentity.isValidName(name) else {
                    return .failure(ParseError(message: "\(argument) needs a user or group name"))
                }
                if argument == "--user" { parsed.identity.user = name } else { parsed.identity.group = name }
            } else {
                return .failure(ParseError(message: "unknown argument \(argument)"))
            }
        }
        return .success(parsed)
    }

    public struct ParseError: Error, Sendable, Equatable {
        public var message: String
    }

    public static let usage = "[--group DIR] [--user USER] [--group-name GROUP]"
}
