import Crypto
import Foundation
import SwiftASN1
import X509

/// nginx on loopback serving `/1k` and `/1m` over HTTP and HTTPS, one
/// worker, logs off: the origin every scenario shares. HTTPS also listens
/// on 127.0.0.2, the address no proxy intercepts (mitmproxy matches
/// `ignore_hosts` against addresses too, and localhost is 127.0.0.1).
/// HTTP/2 has a TLS port of its own, so that a client or proxy offering h2
/// by ALPN to `httpsPort` still gets the HTTP/1.1 the HTTP/1 cells measure.
struct NginxOrigin {
    let httpPort: Int
    let httpsPort: Int
    /// TLS offering h2 by ALPN (and HTTP/1.1 to clients that ask only for it).
    let http2Port: Int
    /// The origin's self-signed certificate (PEM), for clients and proxies.
    let certificate: URL
    /// Its key (PEM), for the WebSocket origin, which serves the same name.
    let key: URL
    let process: BenchProcess

    static func start(in directory: URL, core: Int) throws -> NginxOrigin {
        let nginx = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let nginx else { throw BenchError("nginx is not installed (scripts/install-deps.sh --bench installs it)") }
        let www = directory.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: www, withIntermediateDirectories: true)
        try Data(repeating: 0x61, count: 1024).write(to: www.appendingPathComponent("1k"))
        try Data(repeating: 0x62, count: 1 << 20).write(to: www.appendingPathComponent("1m"))
        // 1 GiB, sparse: read back as zeros, for the streaming memory check.
        let big = www.appendingPathComponent("1g")
        _ = FileManager.default.createFile(atPath: big.path, contents: nil)
        let handle = try FileHandle(forWritingTo: big)
        try handle.truncate(atOffset: 1 << 30)
        try handle.close()
        try PageLoadBench.makePage(in: www)
        let (cert, key) = try selfSigned()
        let certificate = directory.appendingPathComponent("origin.pem")
        let keyFile = directory.appendingPathComponent("origin.key")
        try Data(cert.utf8).write(to: certificate)
        try Data(key.utf8).write(to: keyFile)
        for path in [directory.path, www.path] { chmod(path, 0o755) }
        for file in [certificate, keyFile] { chmod(file.path, 0o644) }
        let (httpPort, httpsPort, http2Port) = (try Wait.freePort(), try Wait.freePort(), try Wait.freePort())
        let config = directory.appendingPathComponent("nginx.conf")
        try Data(
            """
            worker_processes 1;
            daemon off;
            master_process off;
            pid \(directory.path)/nginx.pid;
            error_log \(directory.path)/nginx-error.log warn;
            events { worker_connections 8192; }
            http {
                access_log off;
                keepalive_requests 100000000;
                keepalive_timeout 300s;
                types { text/html html; text/css css; application/javascript js; image/png png; }
                default_type application/octet-stream;
                sendfile on;
                server {
                    listen 127.0.0.1:\(httpPort) backlog=4096;
                    listen 127.0.0.1:\(httpsPort) ssl backlog=4096;
                    listen 127.0.0.2:\(httpsPort) ssl backlog=4096;
                    listen 127.0.0.1:\(http2Port) ssl http2 backlog=4096;
                    ssl_certificate \(certificate.path);
                    ssl_certificate_key \(keyFile.path);
                    ssl_session_cache off;
                    ssl_session_tickets off;
                    root \(www.path);
                }
            }

            """.utf8
        ).write(to: config)
        let process = try BenchProcess(
            "nginx", core: core, executable: nginx, arguments: ["-c", config.path, "-e", "\(directory.path)/nginx-error.log"],
            logDirectory: directory)
        try Wait.until("nginx", seconds: 10) { Wait.accepts(httpPort) && Wait.accepts(httpsPort) && Wait.accepts(http2Port) }
        return NginxOrigin(
            httpPort: httpPort, httpsPort: httpsPort, http2Port: http2Port, certificate: certificate, key: keyFile, process: process)
    }

    /// Moves the origin to `core` (nginx runs as one process here).
    func pin(to core: Int) throws { try process.pin(to: core) }

    /// P-256, for localhost and 127.0.0.1. Session resumption is off in
    /// nginx, so every new connection pays a full handshake.
    private static func selfSigned() throws -> (certificate: String, key: String) {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("localhost") }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(7 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                SubjectAlternativeNames([
                    .dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 2])),
                ])
            },
            issuerPrivateKey: .init(key))
        return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
    }
}
