import Foundation

/// Every path of the group directory (the App Group) and of the supervisor's
/// private directory. No other file spells a path out.
public struct GroupPaths: Sendable, Equatable {
    public static let installedRoot = "/var/lib/busymate/group"
    public static let developmentRoot = "shared-group"
    public static let environmentKey = "BUSYMATE_GROUP"

    public let root: URL

    public init(root: URL) {
        self.root = root.standardizedFileURL
    }

    /// `--group` wins, then `$BUSYMATE_GROUP`, then the installed directory
    /// when it exists, then `./shared-group` (a development checkout).
    public static func resolve(
        explicit: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        currentDirectory: String = FileManager.default.currentDirectoryPath,
        installedExists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }
    ) -> GroupPaths {
        func absolute(_ path: String) -> URL {
            path.hasPrefix("/")
                ? URL(fileURLWithPath: path)
                : URL(fileURLWithPath: currentDirectory).appendingPathComponent(path)
        }
        if let explicit, !explicit.isEmpty { return GroupPaths(root: absolute(explicit)) }
        if let env = environment[environmentKey], !env.isEmpty { return GroupPaths(root: absolute(env)) }
        if installedExists(installedRoot) { return GroupPaths(root: URL(fileURLWithPath: installedRoot)) }
        return GroupPaths(root: absolute(developmentRoot))
    }

    private func file(_ name: String) -> URL { root.appendingPathComponent(name) }

    public var settings: URL { file("settings.json") }
    public var caPEM: URL { file("ca.pem") }
    public var caDER: URL { file("ca.der") }
    public var caKey: URL { file("ca.key") }
    public var deviceToken: URL { file("device-jwt.json") }
    /// The team database's mirror (`busymate cloud postgres`), for the tunnel only.
    public var teamDatabase: URL { file("cloud-postgres.json") }
    public var captureDatabase: URL { file("capture.sqlite") }
    public var bodies: URL { file("bodies") }
    public var notifyDirectory: URL { file("notify") }
    public var status: URL { file("status.json") }
    public var openExchanges: URL { file("open-exchanges.json") }
    public var controlSocket: URL { file("control.sock") }
    /// The web page's access token (0640 root:busymate).
    public var webToken: URL { file("web-token") }
    /// What the onboarding listener served, per client (the web front writes it).
    public var onboarding: URL { file("onboarding.json") }
    public var readme: URL { file("README.md") }

    public func notifySocket(role: String, pid: Int32) -> URL {
        notifyDirectory.appendingPathComponent("\(role)-\(pid).sock")
    }

    /// The supervisor's private state (the Keychain's counterpart) sits beside
    /// the group directory: `…/busymate/private` when installed, `.private`
    /// next to any other group directory (a development checkout).
    public var privateDirectory: URL {
        let parent = root.deletingLastPathComponent()
        return parent.appendingPathComponent(root.lastPathComponent == "group" ? "private" : ".private")
    }

    public var privateDeviceToken: URL { privateDirectory.appendingPathComponent("device-jwt.json") }
    /// The account's API URL and anon key (`busymate pair --api … --anon-key …`).
    public var privateCloudConfig: URL { privateDirectory.appendingPathComponent("cloud.json") }
    /// This appliance's device uuid, made once, kept across pairings.
    public var privateDeviceUUID: URL { privateDirectory.appendingPathComponent("device-uuid") }
    public var privateTeamDatabase: URL { privateDirectory.appendingPathComponent("cloud-postgres.json") }

    /// The names inside the group directory whose change means a reload.
    public enum Watched: String, Sendable, CaseIterable {
        case settings = "settings.json"
        case deviceToken = "device-jwt.json"
        case teamDatabase = "cloud-postgres.json"
        case caPEM = "ca.pem"
        case caKey = "ca.key"
        case controlSocket = "control.sock"
    }
}
