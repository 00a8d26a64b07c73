import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The capture hook: every row of the store is made here, from what the
/// layers report, and nowhere else. An HTTP exchange and a passed-through
/// tunnel are followed as they happen (`ExchangeCapture`, `TunnelCapture`);
/// what never became an exchange (a refused request, a head that never came
/// whole, a failed client handshake) is one row at once.
struct CaptureHook: Sendable {
    let writer: any CaptureSink

    // MARK: HTTP exchanges

    /// A request head has arrived: its row follows it to the end.
    func exchange(_ head: HTTPRequestHead, target: ProxyTarget, originForm: String, scheme: String, tlsMode: ExchangeRecord.TLSMode,
                  client: SocketAddress?, eventLoop: EventLoop) -> ExchangeCapture {
        ExchangeCapture(writer: writer, head: head, target: target, originForm: originForm, scheme: scheme, tlsMode: tlsMode, client: client,
                        eventLoop: eventLoop)
    }

    /// A request the decoder refused before it parsed whole: `line` is its
    /// request line as sent, when there was one to read.
    func requestRefused(line: (method: String, target: String)?, intercepted target: ProxyTarget?, client: SocketAddress?,
                        status: HTTPResponseStatus, why: String) {
        var host = target?.host.lowercased() ?? ""
        var url = target.map { "https://\(ExchangeCapture.bracketed($0.host)):\($0.port)" } ?? ""
        var (method, path, port) = ("", "", target?.port ?? 0)
        if let line {
            method = line.method
            if let target {
                path = line.target
                url = "https://\(ExchangeCapture.bracketed(target.host))\(target.port == 443 ? "" : ":\(target.port)")\(line.target)"
            } else if let (parsed, originForm) = ProxyTarget.parseAbsoluteForm(line.target) {
                (host, port, path) = (parsed.host.lowercased(), parsed.port, originForm)
                url = line.target
            } else {
                (path, url) = (line.target, line.target)
            }
        }
        var record = ExchangeRecord(scheme: target == nil ? "http" : "https", method: method, host: host, port: port, path: path,
                                    url: url, tlsMode: target == nil ? .none : .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        record.status = Int(status.code)
        record.reason = status.reasonPhrase
        record.endedAt = Date()
        record.error = "malformed request: \(why); answered \(status.code)"
        writer.submit(record)
    }

    /// A request head that did not arrive whole in time: answered 408.
    func requestHeadTimedOut(intercepted target: ProxyTarget?, client: SocketAddress?, why: String) {
        let host = target?.host.lowercased() ?? ""
        let url = target.map { "https://\(ExchangeCapture.bracketed($0.host)):\($0.port)" } ?? ""
        var record = ExchangeRecord(scheme: target == nil ? "http" : "https", method: "", host: host, port: target?.port ?? 0, path: "",
                                    url: url, tlsMode: target == nil ? .none : .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        record.status = 408
        record.reason = "Request Timeout"
        record.endedAt = Date()
        record.error = "\(why); answered 408"
        writer.submit(record)
    }

    // MARK: TLS and tunnels

    /// The client's TLS handshake with an intercepting leaf failed: refused
    /// (the host is pinned now), broken off, or too slow.
    func handshakeFailed(_ target: ProxyTarget, sni: String?, client: SocketAddress?, why: String) {
        var record = ExchangeRecord(scheme: "https", method: "CONNECT", host: target.host.lowercased(), port: target.port, path: "",
                                    url: target.description, tlsMode: .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        record.sni = sni
        record.endedAt = Date()
        record.error = why
        writer.submit(record)
    }

    /// A CONNECT that is passed through: one row, written when it fails or closes.
    func tunnel(_ head: HTTPRequestHead, target: ProxyTarget, client: SocketAddress?) -> TunnelCapture {
        var record = ExchangeRecord(scheme: "tcp", method: "CONNECT", host: target.host.lowercased(), port: target.port,
                                    path: "", url: target.description, tlsMode: .passthrough)
        record.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
        record.clientAddress = client.map(ExchangeCapture.describe)
        return TunnelCapture(writer: writer, record: record)
    }
}

/// One passed-through tunnel's row as it goes: dialled, then glued until
/// both sides close, with the bytes each way and what the hellos said.
struct TunnelCapture: Sendable {
    let writer: any CaptureSink
    var record: ExchangeRecord

    /// The host_override rule that chose the address.
    mutating func rule(_ name: String) { record.rule = name }

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
