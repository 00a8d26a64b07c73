import BusymateShared
import Crypto
import Foundation
import Logging
import SwiftASN1
import X509

/// Creates the interception CA on first start (P-256, ten years, as
/// mitmproxy's own CA lives long) and reports what `status` shows of it.
enum CertificateAuthorityBootstrap {
    struct Info: Sendable {
        var present: Bool
        var error: String?
        var subject: String?
        var fingerprint: String?
        var notAfter: Date?
        var pemBody: String?
    }

    /// Generates the CA when neither half exists; never overwrites a CA a
    /// person put there, even a broken one.
    static func ensure(_ paths: GroupPaths, logger: Logger) -> (info: Info, generated: Bool) {
        let fm = FileManager.default
        let hasCert = fm.fileExists(atPath: paths.caPEM.path)
        let hasKey = fm.fileExists(atPath: paths.caKey.path)
        var generated = false
        if !hasCert && !hasKey {
            do {
                try generate(paths)
                generated = true
                logger.notice("generated a new interception CA", metadata: ["PATH": "\(paths.caPEM.path)"])
            } catch {
                logger.error("cannot create the CA", metadata: ["ERROR": "\(error)"])
            }
        }
        let info = inspect(paths)
        if let error = info.error { logger.error("the CA is not usable; HTTPS interception is off", metadata: ["ERROR": "\(error)"]) }
        return (info, generated)
    }

    static func generate(_ paths: GroupPaths) throws {
        let key = P256.Signing.PrivateKey()
        let host = ProcessInfo.processInfo.hostName
        let name = try DistinguishedName {
            CommonName("Busymate CA (\(host))")
            OrganizationName("Busymate")
        }
        let now = Date()
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        // The key first: a certificate without its key is worse than neither.
        // Root's alone until SecretFiles lets the tunnel's user read it.
        try AtomicFile.write(Data(key.pemRepresentation.utf8), to: paths.caKey, mode: 0o600)
        try AtomicFile.write(Data(serializer.serializedBytes), to: paths.caDER, mode: 0o644)
        try AtomicFile.write(Data(try certificate.serializeAsPEM().pemString.utf8 + [0x0A]), to: paths.caPEM, mode: 0o644)
    }

    /// A PEM certificate or key is a few KiB.
    static let caFileLimit = 1 << 20

    /// Read without following symlinks: this runs as root, and a group
    /// member may create files in the group directory.
    static func inspect(_ paths: GroupPaths) -> Info {
        var info = Info(present: false)
        let pem: String
        do {
            pem = String(decoding: try GroupFileReader.read(paths.caPEM, limit: caFileLimit), as: UTF8.self)
        } catch {
            info.error = error.isMissing ? "ca.pem is missing" : error.description
            return info
        }
        // The parsers' own errors are never shown: they may quote the file,
        // and status.json is world-readable.
        guard let certificate = try? Certificate(pemEncoded: pem) else {
            info.error = "ca.pem is not a PEM certificate (truncated or corrupt?)"
            return info
        }
        info.present = true
        info.subject = certificate.subject.description
        info.notAfter = certificate.notValidAfter
        var serializer = DER.Serializer()
        if (try? serializer.serialize(certificate)) != nil {
            info.fingerprint = SHA256.hash(data: serializer.serializedBytes).map { String(format: "%02X", $0) }.joined(separator: ":")
            info.pemBody = Data(serializer.serializedBytes).base64EncodedString()
        }
        let keyPEM: String
        do {
            keyPEM = String(decoding: try GroupFileReader.read(paths.caKey, limit: caFileLimit), as: UTF8.self)
        } catch {
            info.error = error.isMissing ? "ca.key is missing" : error.description
            return info
        }
        guard let key = try? P256.Signing.PrivateKey(pemRepresentation: keyPEM) else {
            info.error = "ca.key is not a PEM P-256 private key (truncated or corrupt?)"
            return info
        }
        if Certificate.PublicKey(key.publicKey) != certificate.publicKey {
            info.error = "ca.key does not belong to ca.pem"
        }
        return info
    }

    /// Whether the system trust store (Debian's bundle) holds this CA.
    static func isTrusted(_ info: Info, bundle: String = "/etc/ssl/certs/ca-certificates.crt") -> Bool {
        guard let body = info.pemBody, let text = try? String(contentsOfFile: bundle, encoding: .utf8) else { return false }
        return text.replacingOccurrences(of: "\n", with: "").contains(body)
    }
}
