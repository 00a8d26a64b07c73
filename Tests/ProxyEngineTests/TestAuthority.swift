import BusymateShared
import Foundation
@testable import ProxyEngine

/// An interception CA made for one test by openssl (as a user's own CA
/// would be), loaded the way the tunnel loads the group's.
enum TestAuthority {
    struct Failed: Error, CustomStringConvertible { let description: String }

    static func install(in interception: Interception) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("busymate-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
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
        try openssl.run()
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw Failed(description: "openssl req exited \(openssl.terminationStatus)") }
        interception.reloadCA(paths)
        if let error = interception.caError { throw Failed(description: "the test CA was not loaded: \(error)") }
    }
}
