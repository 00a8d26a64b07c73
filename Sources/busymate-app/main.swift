import BusymateShared
import Foundation
import Supervisor

let usage =
    "usage: busymate-app [--group DIR] [--tunnel PATH] [--tunnel-user USER] [--tunnel-group GROUP] [--web-user USER] [--restart-backoff-max SECONDS] [--attach-deadline SECONDS] [--privileged-port PORT]... | --version\n"
func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("busymate-app: \(message)\n\(usage)".utf8))
    exit(64)
}
var group: String?
var tunnel: String?
var identity = TunnelIdentity.default
var webUser = TunnelIdentity.defaultWebUser
var backoffMax = 30.0
var privileged = PrivilegedPorts()
var attachDeadline = 30.0
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--group": group = arguments.popFirst()
    case "--tunnel": tunnel = arguments.popFirst()
    case "--tunnel-user", "--tunnel-group":
        guard let name = arguments.popFirst(), TunnelIdentity.isValidName(name) else { refuse("\(argument) needs a user or group name") }
        if argument == "--tunnel-user" { identity.user = name } else { identity.group = name }
    case "--web-user":
        guard let name = arguments.popFirst(), TunnelIdentity.isValidName(name) else { refuse("--web-user needs a user name") }
        webUser = name
    case "--restart-backoff-max":
        guard let text = arguments.popFirst(), let value = Double(text), value >= 0.1, value <= 3600 else {
            refuse("--restart-backoff-max needs seconds from 0.1 to 3600")
        }
        backoffMax = value
    case "--privileged-port":
        // Root's own opt-in: settings.json alone cannot open a port below 1024.
        guard let text = arguments.popFirst(), let port = Int(text), (1...1023).contains(port) else {
            refuse("--privileged-port needs a port from 1 to 1023")
        }
        privileged.allowed.insert(port)
    case "--attach-deadline":
        guard let text = arguments.popFirst(), let value = Double(text), value >= 1, value <= 3600 else {
            refuse("--attach-deadline needs seconds from 1 to 3600")
        }
        attachDeadline = value
    case "--version":
        FileHandle.standardOutput.write(Data(BusymateVersion.line("busymate-app").utf8))
        exit(0)
    case "-h", "--help":
        FileHandle.standardOutput.write(Data((usage + "Runs the Busymate supervisor in the foreground (see busymate-app(8)).\n").utf8))
        exit(0)
    default:
        refuse("unknown argument \(argument)")
    }
}
// Another uid, or the web front could signal the tunnel and read ca.key.
if webUser == identity.user { refuse("--web-user must not be the tunnel's user (\(webUser))") }
exit(
    await SupervisorMain.run(
        groupOverride: group, tunnelOverride: tunnel, tunnelIdentity: identity, webUser: webUser, restartBackoffMax: backoffMax,
        privilegedPorts: privileged, attachDeadline: attachDeadline))
