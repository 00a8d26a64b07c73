import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// One exchange as `HTTPForwardHandler` sees it happen, on its event loop.
struct ExchangeCapture {
    var record: ExchangeRecord
    private var requestBody: [UInt8] = []
    private var responseBody: [UInt8] = []

    init(head: HTTPRequestHead, target: ProxyTarget, originForm: String, scheme: String, tlsMode: ExchangeRecord.TLSMode, client: SocketAddress?) {
        let defaultPort = scheme == "https" ? 443 : 80
        let authority = Self.bracketed(target.host) + (target.port == defaultPort ? "" : ":\(target.port)")
        record = ExchangeRecord(scheme: scheme, method: head.method.rawValue, host: target.host.lowercased(), port: target.port,
                                path: originForm, url: "\(scheme)://\(authority)\(originForm)", tlsMode: tlsMode)
        record.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
        record.clientAddress = client.map(Self.describe)
    }

    static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    static func describe(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        return ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    mutating func requestBodyPart(_ buffer: ByteBuffer) {
        record.requestBodySize += buffer.readableBytes
        Self.keep(buffer, in: &requestBody, truncated: &record.requestBodyTruncated)
    }

    mutating func responseBodyPart(_ buffer: ByteBuffer) {
        record.responseBodySize += buffer.readableBytes
        Self.keep(buffer, in: &responseBody, truncated: &record.responseBodyTruncated)
    }

    /// Keeps what fits under the inline limit; what is stored is capped,
    /// never what is forwarded.
    private static func keep(_ buffer: ByteBuffer, in body: inout [UInt8], truncated: inout Bool) {
        let room = CaptureWriter.inlineBodyLimit - body.count
        guard room > 0 else {
            if buffer.readableBytes > 0 { truncated = true }
            return
        }
        body += buffer.readableBytesView.prefix(room)
        if buffer.readableBytes > room { truncated = true }
    }

    mutating func connected(to server: SocketAddress?) {
        record.connectedAt = Date()
        record.serverAddress = server.map(Self.describe)
    }

    mutating func responseHead(_ head: HTTPResponseHead) {
        record.firstByteAt = Date()
        record.status = Int(head.status.code)
        record.reason = head.status.reasonPhrase
        record.responseHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
    }

    func finished(error: String? = nil) -> ExchangeRecord {
        var done = record
        done.endedAt = Date()
        done.error = error
        done.requestBody = requestBody.isEmpty ? nil : Data(requestBody)
        done.responseBody = responseBody.isEmpty ? nil : Data(responseBody)
        return done
    }
}
