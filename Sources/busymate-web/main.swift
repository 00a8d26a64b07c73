import BusymateShared
import Foundation
import WebFront

// Usage: busymate-web [--group DIR] [--user USER] [--group-name GROUP]
// (the supervisor passes all three; see TunnelIdentity).
let usage = "usage: busymate-web [--group DIR] [--user USER] [--group-name GROUP]\n"
func refuse(_ message: String) -> Never {
    FileHandle.standardError.write(Data("busymate-web: \(message)\n\(usage)".utf8))
    exit(64)
}
var group: String?
var identity = TunnelIdentity.default
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--group" {
        group = arguments.popFirst()
    } else if argument.hasPrefix("--group=") {
        group = String(argument.dropFirst("--group=".count))
    } else if argument == "--user" || argument == "--group-name" {
        guard let name = arguments.popFirst(), TunnelIdentity.isValidName(name) else { refuse("\(argument) needs a user or group name") }
        if argument == "--user" { identity.user = name } else { identity.group = name }
    } else {
        refuse("unknown argument \(argument)")
    }
}
switch WebMain.prepare(groupOverride: group, identity: identity) {
case let .failure(code):
    exit(code.code)
case let .success(prepared):
    exit(await WebMain.run(prepared))
}
