import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// The capture hook: every row of the store is made here, from what the
/// layers report, and nowhere else. An HTTP exchange and a passed-through
/// tunnel are followed as they happen (`ExchangeCapture`, `TunnelCapture`);
/// what never became an exchange (a refused request, a head that never came
/// whole, a failed client handshake) is one row at once.
/// `peer` (the connection's device, front end, connection and stream) is
/// put on each row. An exchange's events come as an `ExchangeHook`
/// (CaptureHook+ExchangeHook.swift); pins and held messages go to the
/// same sink.
struct CaptureHook: Sendable {
    let writer: any CaptureSink

    /// A request the decoder refused before it parsed whole: `line` is its
    /// request line as sent, when there was one to read.
    func requestRefused(
        line: (method: String, target: String)?, intercepted target: ProxyTarget?, client: SocketAddress?,
        status: HTTPResponseStatus, why: String, answer: LocalResponse?, peer: CapturePeer
    ) {
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
        var record = ExchangeRecord(
            scheme: target == nil ? "http" : "https", method: method, host: host, port: port, path: path,
            url: url, tlsMode: target == nil ? .none : .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        record.status = Int(status.code)
        record.reason = status.reasonPhrase
        record.endedAt = Date()
        record.error = "malformed request: \(why); answered \(status.code)"
        // The answer as sent (nil: a response had begun, so none was).
        if let answer {
            record.responseHeaders = ExchangeRecord.encodeHeaders(answer.head.headers.map { ($0.name, $0.value) })
            if let body = answer.body, body.readableBytes > 0 {
                record.responseBody = Data(body.readableBytesView)
                record.responseBodySize = body.readableBytes
            }
        }
        writer.submit(record)
    }

    /// A request head that did not arrive whole in time: answered 408.
    func requestHeadTimedOut(intercepted target: ProxyTarget?, client: SocketAddress?, why: String, peer: CapturePeer) {
        let host = target?.host.lowercased() ?? ""
        let url = target.map { "https://\(ExchangeCapture.bracketed($0.host)):\($0.port)" } ?? ""
        var record = ExchangeRecord(
            scheme: target == nil ? "http" : "https", method: "", host: host, port: target?.port ?? 0, path: "",
            url: url, tlsMode: target == nil ? .none : .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        record.status = 408
        record.reason = "Request Timeout"
        record.endedAt = Date()
        record.error = "\(why); answered 408"
        writer.submit(record)
    }

    // MARK: TLS and tunnels

    /// The client's TLS handshake with an intercepting leaf failed: refused
    /// (the host is pinned now), broken off, or too slow.
    func handshakeFailed(_ target: ProxyTarget, sni: String?, client: SocketAddress?, why: String, peer: CapturePeer) {
        var record = ExchangeRecord(
            scheme: "https", method: "CONNECT", host: target.host.lowercased(), port: target.port, path: "",
            url: target.description, tlsMode: .mitm)
        record.clientAddress = client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        record.sni = sni
        record.endedAt = Date()
        record.error = why
        writer.submit(record)
    }

    /// A SOCKS5 client refused before it was connected: a bare handshake,
    /// or a CONNECT to `target` that could not be dialled.
    func socksRefused(_ target: ProxyTarget?, client: SocketAddress?, why: String, peer: CapturePeer) {
        var record = ExchangeRecord(
            scheme: "tcp", method: target == nil ? "" : "CONNECT", host: target?.host.lowercased() ?? "",
            port: target?.port ?? 0, path: "", url: target?.description ?? "", tlsMode: target == nil ? .none : .passthrough)
        record.clientAddress = client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        record.endedAt = Date()
        record.error = why
        writer.submit(record)
    }

    /// A CONNECT that is passed through: one row, written when it fails or closes.
    func tunnel(_ head: HTTPRequestHead, target: ProxyTarget, client: SocketAddress?, peer: CapturePeer) -> TunnelCapture {
        var record = ExchangeRecord(
            scheme: "tcp", method: "CONNECT", host: target.host.lowercased(), port: target.port,
            path: "", url: target.description, tlsMode: .passthrough)
        record.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
        record.clientAddress = client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        return TunnelCapture(writer: writer, record: record)
    }
}

extension CaptureHook {
    /// One DNS query the forwarder answered (or could not): a row of its
    /// own kind (`scheme` dns, `method` DNS), so filters, the list and the
    /// page show it beside the exchanges, as mitmproxy shows DNS flows.
    func dnsQuery(_ query: DNSExchange, peer: CapturePeer) {
        let name = query.name.lowercased()
        var record = ExchangeRecord(
            startedAt: query.startedAt, scheme: "dns", method: "DNS", host: name, port: 53, path: "/\(query.type)",
            url: "dns://\(name)/\(query.type)", tlsMode: .none)
        record.httpVersion = query.transport
        record.clientAddress = query.client.map(ExchangeCapture.describe)
        peer.stamp(&record)
        record.serverAddress = query.server
        record.requestHeaders = "[]"
        record.endedAt = query.endedAt
        if let rcode = query.rcode {
            record.status = Int(rcode)
            record.reason = DNSMessage.rcodeName(rcode)
            record.responseHeaders = ExchangeRecord.encodeHeaders([("content-type", "text/plain; charset=utf-8")])
            let body = Data(query.answers.joined(separator: "\n").utf8)
            record.responseBody = body
            record.responseBodySize = body.count
        }
        record.error = query.error
        writer.submit(record)
    }
}
