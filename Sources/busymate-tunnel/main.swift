import Foundation
import ProxyEngine

// Usage: busymate-tunnel [--group DIR]
var group: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--group" {
        group = arguments.popFirst()
    } else if argument.hasPrefix("--group=") {
        group = String(argument.dropFirst("--group=".count))
    } else {
        FileHandle.standardError.write(Data("busymate-tunnel: unknown argument \(argument)\nusage: busymate-tunnel [--group DIR]\n".utf8))
        exit(64)
    }
}
switch TunnelMain.prepare(groupOverride: group) {
case let .failure(code):
    exit(code.code)
case let .success(prepared):
    exit(await TunnelMain.run(prepared))
}
