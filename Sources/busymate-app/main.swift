import BusymateShared
import Foundation
import Supervisor

let usage = "usage: busymate-app [--group DIR] [--tunnel PATH] [--tunnel-user USER] [--tunnel-group GROUP] [--restart-backoff-max SECONDS] [--attach-deadline SECONDS]\n"
func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("busymate-app: \(message)\n\(usage)".utf8))
    exit(64)
}
var group: String?
var tunnel: String?
var identity = TunnelIdentity.default
var backoffMax = 30.0
var attachDeadline = 15.0
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--group": group = arguments.popFirst()
    case "--tunnel": tunnel = arguments.popFirst()
    case "--tunnel-user", "--tunnel-group":
        guard let name = arguments.popFirst(), TunnelIdentity.isValidName(name) else { refuse("\(argument) needs a user or group name") }
        if argument == "--tunnel-user" { identity.user = name } else { identity.group = name }
    case "--restart-backoff-max":
        guard let text = arguments.popFirst(), let value = Double(text), value >= 0.1, value <= 3600 else {
            refuse("--restart-backoff-max needs seconds from 0.1 to 3600")
        }
        backoffMax = value
    case "--attach-deadline":
        guard let text = arguments.popFirst(), let value = Double(text), value >= 1, value <= 3600 else {
            refuse("--attach-deadline needs seconds from 1 to 3600")
        }
        attachDeadline = value
    case "-h", "--help":
        FileHandle.standardOutput.write(Data((usage + "Runs the Busymate supervisor in the foreground (see README.md).\n").utf8))
        exit(0)
    default:
        refuse("unknown argument \(argument)")
    }
}
exit(await SupervisorMain.run(groupOverride: group, tunnelOverride: tunnel, tunnelIdentity: identity, restartBackoffMax: backoffMax, attachDeadline: attachDeadline))
