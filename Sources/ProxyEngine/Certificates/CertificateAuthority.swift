import BusymateShared
import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// The group's CA, minting leaf certificates for intercepted hosts. One P-256
/// leaf key per tunnel (as mitmproxy keeps one key), so a mint is one
/// signature; leaves are cached by name.
public final class CertificateAuthority: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    struct Leaf {
        let certificate: NIOSSLCertificate
        let notAfter: Date
    }

    let caCertificate: Certificate
    private let caKey: Certificate.PrivateKey
    private let caKeyIdentifier: ArraySlice<UInt8>?
    /// Minting needs only the leaf key's public half; BoringSSL gets the rest.
    private let leafPublicKey: Certificate.PublicKey
    let leafKeyForNIO: NIOSSLPrivateKey
    private let leaves = Mutex(LeafCache<Leaf>(capacity: 4096))
    /// A leaf lives this long, backdated a day for skewed clocks.
    static let validity: TimeInterval = 30 * 86_400
    static let backdate: TimeInterval = 86_400

    public init(certificatePEM: String, keyPEM: String) throws {
        do {
            caCertificate = try Certificate(pemEncoded: certificatePEM)
        } catch {
            // Never the parser's words: they may quote the file.
            throw Failure(description: "ca.pem is not a PEM certificate (truncated or corrupt?)")
        }
        do {
            caKey = try Certificate.PrivateKey(pemEncoded: keyPEM)
        } catch {
            // Never the parser's words: they may quote the key.
            throw Failure(description: "ca.key is not a PEM private key (truncated or corrupt?)")
        }
        guard caKey.publicKey == caCertificate.publicKey else {
            throw Failure(description: "ca.key does not belong to ca.pem")
        }
        caKeyIdentifier = try? caCertificate.extensions.subjectKeyIdentifier?.keyIdentifier
        let leafKey = P256.Signing.PrivateKey()
        leafPublicKey = Certificate.PublicKey(leafKey.publicKey)
        leafKeyForNIO = try NIOSSLPrivateKey(bytes: Array(leafKey.pemRepresentation.utf8), format: .pem)
    }

    public static func load(_ paths: GroupPaths) throws -> CertificateAuthority {
        let pem: String, key: String
        do {
            pem = String(decoding: try GroupFileReader.read(paths.caPEM, limit: 1 << 20), as: UTF8.self)
            key = String(decoding: try GroupFileReader.read(paths.caKey, limit: 1 << 20), as: UTF8.self)
        } catch {
            throw Failure(description: error.description)
        }
        return try CertificateAuthority(certificatePEM: pem, keyPEM: key)
    }

    /// The leaf for `name` (a host name or an IP literal), from the cache
    /// while it has more than a day left.
    func leaf(for name: String) throws -> Leaf {
        let key = name.lowercased()
        let now = Date()
        if let cached = leaves.withLock({ $0.get(key) }), cached.notAfter.timeIntervalSince(now) > 86_400 {
            return cached
        }
        let leaf = try mint(key, now: now)
        leaves.withLock { $0.set(key, leaf) }
        return leaf
    }

    /// A fresh leaf for `name`, past the cache: what `make bench` times.
    public func mintUncached(_ name: String) throws -> NIOSSLCertificate {
        try mint(name.lowercased(), now: Date()).certificate
    }

    func mint(_ name: String, now: Date) throws -> Leaf {
        let notAfter = now.addingTimeInterval(Self.validity)
        let san: GeneralName
        if let ip = Self.ipBytes(name) {
            san = .ipAddress(ASN1OctetString(contentBytes: ArraySlice(ip)))
        } else {
            san = .dnsName(name)
        }
        let subject = try DistinguishedName {
            CommonName(String(name.prefix(64)))
            OrganizationName("Busymate")
        }
        let caKeyIdentifier = self.caKeyIdentifier
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.serverAuth])
            SubjectAlternativeNames([san])
            if let caKeyIdentifier {
                AuthorityKeyIdentifier(keyIdentifier: caKeyIdentifier)
            }
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: leafPublicKey,
            notValidBefore: now.addingTimeInterval(-Self.backdate), notValidAfter: notAfter,
            issuer: caCertificate.subject, subject: subject,
            signatureAlgorithm: Self.signatureAlgorithm(for: caKey), extensions: extensions, issuerPrivateKey: caKey)
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Leaf(certificate: try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der), notAfter: notAfter)
    }

    static func signatureAlgorithm(for key: Certificate.PrivateKey) -> Certificate.SignatureAlgorithm {
        switch key.publicKey.description {
        case let d where d.contains("P384"): return .ecdsaWithSHA384
        case let d where d.contains("P521"): return .ecdsaWithSHA512
        case let d where d.contains("RSA"): return .sha256WithRSAEncryption
        default: return .ecdsaWithSHA256
        }
    }

    static func ipBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
