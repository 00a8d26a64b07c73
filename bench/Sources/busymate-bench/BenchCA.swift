import Crypto
import Foundation
import ProxyEngine
import X509

/// A throwaway CA like the supervisor's (P-256), for the mint micro-benchmark.
enum BenchCA {
    static func make() throws -> CertificateAuthority {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("Busymate bench CA") }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
                SubjectKeyIdentifier(hash: .init(key.publicKey))
            },
            issuerPrivateKey: .init(key))
        return try CertificateAuthority(certificatePEM: try certificate.serializeAsPEM().pemString, keyPEM: key.pemRepresentation)
    }
}
