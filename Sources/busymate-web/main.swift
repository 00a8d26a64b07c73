import BusymateShared
import Foundation
import WebFront

// Usage: busymate-web [--group DIR] [--user USER] [--group-name GROUP]
// (the supervisor passes all three; see TunnelIdentity), or --version.
if Array(CommandLine.arguments.dropFirst()) == ["--version"] {
    FileHandle.standardOutput.write(Data(BusymateVersion.line("busymate-web").utf8))
    exit(0)
}
switch ChildArguments.parse(CommandLine.arguments.dropFirst()) {
case let .failure(error):
    FileHandle.standardError.write(Data("busymate-web: \(error.message)\nusage: busymate-web \(ChildArguments.usage)\n".utf8))
    exit(64)
case let .success(arguments):
    switch WebMain.prepare(groupOverride: arguments.group, identity: arguments.identity) {
    case let .failure(code):
        exit(code.code)
    case let .success(prepared):
        exit(await WebMain.run(prepared))
    }
}
