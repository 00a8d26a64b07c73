import Foundation
import Testing

@testable import BusymateShared

@Suite struct GroupPathsTests {
    @Test func explicitBeatsEnvironmentBeatsInstalledBeatsDevelopment() {
        let env = [GroupPaths.environmentKey: "/env/group"]
        #expect(
            GroupPaths.resolve(explicit: "/cli/group", environment: env, currentDirectory: "/work", installedExists: { _ in true }).root
                .path == "/cli/group")
        #expect(
            GroupPaths.resolve(explicit: nil, environment: env, currentDirectory: "/work", installedExists: { _ in true }).root.path
                == "/env/group")
        #expect(
            GroupPaths.resolve(explicit: nil, environment: [:], currentDirectory: "/work", installedExists: { _ in true }).root.path
                == "/var/lib/busymate/group")
        #expect(
            GroupPaths.resolve(explicit: nil, environment: [:], currentDirectory: "/work", installedExists: { _ in false }).root.path
                == "/work/shared-group")
        #expect(
            GroupPaths.resolve(explicit: "rel/dir", environment: [:], currentDirectory: "/work", installedExists: { _ in false }).root.path
                == "/work/rel/dir")
    }

    @Test func filesLiveInTheGroupAndPrivateStateBesideIt() {
        let installed = GroupPaths(root: URL(fileURLWithPath: "/var/lib/busymate/group"))
        #expect(installed.settings.path == "/var/lib/busymate/group/settings.json")
        #expect(installed.caKey.path == "/var/lib/busymate/group/ca.key")
        #expect(installed.captureDatabase.path == "/var/lib/busymate/group/capture.sqlite")
        #expect(installed.controlSocket.path == "/var/lib/busymate/group/control.sock")
        #expect(installed.notifySocket(role: "tunnel", pid: 42).path == "/var/lib/busymate/group/notify/tunnel-42.sock")
        #expect(installed.privateDirectory.path == "/var/lib/busymate/private")
        let dev = GroupPaths(root: URL(fileURLWithPath: "/src/busymate/shared-group"))
        #expect(dev.privateDirectory.path == "/src/busymate/.private")
        #expect(!dev.privateDirectory.path.hasPrefix(dev.root.path + "/"))
    }
}
