import Foundation

/// The origin's TLS handshake, part of an HTTP/2-offering dial, did not end in time.
struct UpstreamHandshakeTimeout: Error, CustomStringConvertible {
    let seconds: Double
    var description: String {
        "the server did not finish the TLS handshake within \(TimeoutWords.format(seconds)) s (timeouts.tls_handshake_seconds)"
    }
}
