/// Whom the tunnel drops to. It comes from the supervisor's command line
/// (the unit's `ExecStart=`), which only root can change, and reaches the
/// tunnel on its own command line: never from the group-writable
/// `settings.json`, or a member of the group could pick any user.
public struct TunnelIdentity: Sendable, Equatable {
    public var user: String
    public var group: String

    public static let `default` = TunnelIdentity(user: "busymate", group: "busymate")
    /// The web front's user (busymate-app's `--web-user`); its group is the tunnel's.
    public static let defaultWebUser = "busymate-web"

    public init(user: String, group: String) {
        self.user = user
        self.group = group
    }

    /// The tunnel's own arguments for it.
    public var arguments: [String] { ["--user", user, "--group-name", group] }

    /// A user or group name as `useradd` accepts it.
    public static func isValidName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 32 && text.utf8.first != UInt8(ascii: "-")
            && text.utf8.allSatisfy {
                $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".")
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
            }
    }
}
