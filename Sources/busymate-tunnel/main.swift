import BusymateShared
import Cloud
import Foundation
import Tunnel

// Usage: busymate-tunnel [--group DIR] [--user USER] [--group-name GROUP]
// (the supervisor passes all three; see TunnelIdentity).
// busymate-tunnel --cloud-call [--user USER] [--group-name GROUP]: one call
// to the account's API for the supervisor's pairing (CloudCall), made
// after giving up root.
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["--version"] {
    FileHandle.standardOutput.write(Data(BusymateVersion.line("busymate-tunnel").utf8))
    exit(0)
}
let cloudCall = arguments.first == "--cloud-call"
if cloudCall { arguments.removeFirst() }
switch ChildArguments.parse(arguments) {
case let .failure(error):
    FileHandle.standardError.write(Data("busymate-tunnel: \(error.message)\nusage: busymate-tunnel \(ChildArguments.usage)\n".utf8))
    exit(64)
case let .success(arguments) where cloudCall:
    do {
        _ = try PrivilegeDrop.drop(user: arguments.identity.user, group: arguments.identity.group)
    } catch {
        // The child's one answer line on stdout (its protocol with the supervisor), not a log.
        FileHandle.standardOutput.write(Data((CloudCallResult.failed("cannot give up root for the call: \(error)").line + "\n").utf8))
        exit(0)
    }
    exit(await CloudCall.main())
case let .success(arguments):
    switch TunnelMain.prepare(groupOverride: arguments.group, identity: arguments.identity) {
    case let .failure(code):
        exit(code.code)
    case let .success(prepared):
        exit(await TunnelMain.run(prepared))
    }
}
