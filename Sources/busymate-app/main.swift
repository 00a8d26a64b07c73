import Foundation
import Supervisor

// Usage: busymate-app [--group DIR] [--tunnel PATH]
var group: String?
var tunnel: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--group": group = arguments.popFirst()
    case "--tunnel": tunnel = arguments.popFirst()
    case "-h", "--help":
        FileHandle.standardOutput.write(Data("usage: busymate-app [--group DIR] [--tunnel PATH]\nRuns the Busymate supervisor in the foreground (see README.md).\n".utf8))
        exit(0)
    default:
        FileHandle.standardError.write(Data("busymate-app: unknown argument \(argument)\nusage: busymate-app [--group DIR] [--tunnel PATH]\n".utf8))
        exit(64)
    }
}
exit(await SupervisorMain.run(groupOverride: group, tunnelOverride: tunnel))
