import BusymateShared
import Crypto
import Foundation
import Logging
import Testing
import X509

@testable import Supervisor

@Suite struct SupervisorPartsTests {
    private func tempGroup() throws -> GroupPaths {
        let url = URL(fileURLWithPath: "/tmp/bms-\(UInt32.random(in: 0...UInt32.max))/group")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return GroupPaths(root: url)
    }

    @Test func generatesAP256CAThatCanOnlySignLeaves() throws {
        let paths = try tempGroup()
        defer { try? FileManager.default.removeItem(at: paths.root.deletingLastPathComponent()) }
        let (info, generated) = CertificateAuthorityBootstrap.ensure(paths, logger: Logger(label: "test"))
        #expect(generated)
        #expect(info.present && info.error == nil)
        let certificate = try Certificate(pemEncoded: String(contentsOf: paths.caPEM, encoding: .utf8))
        let constraints = try certificate.extensions.basicConstraints
        #expect(constraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(try certificate.extensions.keyUsage?.keyCertSign == true)
        #expect(certificate.notValidAfter.timeIntervalSinceNow > 9 * 365 * 86_400)
        let key = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOf: paths.caKey, encoding: .utf8))
        #expect(Certificate.PublicKey(key.publicKey) == certificate.publicKey)
        let der = try Data(contentsOf: paths.caDER)
        #expect(try Certificate(derEncoded: Array(der)) == certificate)
        let keyMode = try FileManager.default.attributesOfItem(atPath: paths.caKey.path)[.posixPermissions] as? Int
        // Root's alone until SecretFiles adds the tunnel's user (an ACL).
        #expect(keyMode == 0o600)
        #expect(!CertificateAuthorityBootstrap.isTrusted(info, bundle: "/dev/null"))
        if geteuid() == 0, let tunnel = PrivilegeDrop.lookupUser("busymate") {
            SecretFiles.protect(paths.caKey, reader: tunnel, logger: Logger(label: "test"))
            var st = stat()
            // 0640 root:root: the group bits are the ACL mask (a fallback would be the tunnel user's, 0440).
            #expect(stat(paths.caKey.path, &st) == 0 && st.st_mode & 0o777 == 0o640 && st.st_uid == 0 && st.st_gid == 0)
        }
    }

    @Test func neverOverwritesAPartialCA() throws {
        let paths = try tempGroup()
        defer { try? FileManager.default.removeItem(at: paths.root.deletingLastPathComponent()) }
        try Data("not a certificate".utf8).write(to: paths.caPEM)
        let (info, generated) = CertificateAuthorityBootstrap.ensure(paths, logger: Logger(label: "test"))
        #expect(!generated)
        #expect(info.error != nil)
        #expect(try String(contentsOf: paths.caPEM, encoding: .utf8) == "not a certificate")
        #expect(!FileManager.default.fileExists(atPath: paths.caKey.path))
    }

    @Test func theSkeletonReadmeIsTheOneTheSupervisorWrites() throws {
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        #expect(try String(contentsOf: repo.appendingPathComponent("shared-group/README.md"), encoding: .utf8) == GroupDirectory.readme)
    }

    @Test func exitStatusesAreDescribed() {
        #expect(TunnelLauncher.describe(pid: 1, status: 0).clean)
        #expect(TunnelLauncher.describe(pid: 1, status: 78 << 8).description == "exited with status 78")
        let killed = TunnelLauncher.describe(pid: 1, status: 9)
        #expect(!killed.clean && killed.description.hasPrefix("killed by signal 9"))
    }
}
