import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// One passed-through tunnel's row as it goes: dialled, then glued until
/// both sides close, with the bytes each way and what the hellos said.
struct TunnelCapture: Sendable {
    let writer: any CaptureSink
    var record: ExchangeRecord

    /// The host_override rule that chose the address.
    mutating func rule(_ name: String) { record.rule = name }

    /// The client was told `200 Connection established` (explicit proxy).
    mutating func established() {
        record.firstByteAt = Date()
        record.status = 200
        record.reason = "Connection established"
    }

    func failed(_ error: String) {
        var done = record
        done.endedAt = Date()
        done.error = error
        writer.submit(done)
    }

    /// Glued to the server.
    mutating func opened(to server: SocketAddress?) {
        record.connectedAt = Date()
        record.serverAddress = server.map(ExchangeCapture.describe)
    }

    /// Both sides have closed: the row, with the bytes each way and what the hellos said.
    func closed(_ counts: TunnelByteCounts) {
        var closed = record
        closed.endedAt = Date()
        closed.bytesUp = counts.up.load(ordering: .relaxed)
        closed.bytesDown = counts.down.load(ordering: .relaxed)
        let hello = counts.hello.withLock { $0 }
        (closed.sni, closed.tlsVersion, closed.tlsCipher) = (hello.sni, hello.version, hello.cipher)
        writer.submit(closed)
    }
}
