import BusymateShared
import Foundation

@testable import ProxyEngine

/// An interception CA made by openssl (as a user's own CA would be), once
/// per test process, loaded the way the tunnel loads the group's. Once:
/// Foundation's `Process` is not to be spawned and waited on from many
/// test tasks at the same time.
enum TestAuthority {
    struct Failed: Error, CustomStringConvertible { let description: String }

    private static let made: Result<GroupPaths, Failed> = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("busymate-ca-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        } catch {
            return .failure(Failed(description: "cannot make \(dir.path): \(error)"))
        }
        let paths = GroupPaths(root: dir)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=Busymate test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", paths.caKey.path, "-out", paths.caPEM.path,
        ]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        do {
            try openssl.runSerialized()
        } catch {
            return .failure(Failed(description: "cannot run openssl: \(error)"))
        }
        openssl.waitForExit()
        guard openssl.terminationStatus == 0 else {
            return .failure(Failed(description: "openssl req exited \(openssl.terminationStatus)"))
        }
        return .success(paths)
    }()

    static func install(in interception: Interception) throws {
        let paths = try made.get()
        interception.reloadCA(paths)
        if let error = interception.caError { throw Failed(description: "the test CA was not loaded: \(error)") }
    }
}
