import BusymateShared
import CaptureStore
import Foundation
import NIOCore
import NIOHTTP1

/// One exchange's row as it is built, from what the capture hook is told
/// (it lives in the exchange's `ExchangeFlow`); on the connection's event loop.
struct ExchangeCapture: Sendable {
    var record: ExchangeRecord
    private let writer: any CaptureSink
    /// The connection's: body files are written from it.
    private let eventLoop: EventLoop
    private var requestBody: BodySink
    private var responseBody: BodySink

    init(
        writer: any CaptureSink, head: HTTPRequestHead, target: ProxyTarget, originForm: String, scheme: String,
        tlsMode: ExchangeRecord.TLSMode, client: SocketAddress?, peer: CapturePeer = .unknown, eventLoop: EventLoop
    ) {
        self.writer = writer
        self.eventLoop = eventLoop
        let limit = writer.bodyMax
        requestBody = BodySink(direction: .request, limit: limit)
        responseBody = BodySink(direction: .response, limit: limit)
        record = ExchangeRecord(
            scheme: scheme, method: head.method.rawValue, host: target.host.lowercased(), port: target.port,
            path: originForm, url: Self.url(scheme: scheme, target: target, originForm: originForm), tlsMode: tlsMode)
        record.httpVersion = "HTTP/\(head.version.major).\(head.version.minor)"
        record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
        record.clientAddress = client.map(Self.describe)
        peer.stamp(&record)
        writer.open?.opened(
            OpenExchangesFile.Entry(
                requestID: record.requestID, startedAt: record.startedAt, method: record.method,
                url: record.url, client: record.clientAddress))
    }

    /// As rows store it, and as rules match it: the port only when not the scheme's default.
    static func url(scheme: String, target: ProxyTarget, originForm: String) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        return "\(scheme)://\(bracketed(target.host))\(target.port == defaultPort ? "" : ":\(target.port)")\(originForm)"
    }

    static func bracketed(_ host: String) -> String { host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host }

    static func describe(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        return ip.utf8.contains(UInt8(ascii: ":")) ? "[\(ip)]:\(port)" : "\(ip):\(port)"
    }

    /// A breakpoint's edit: the row shows the request that went upstream.
    mutating func requestEdited(_ head: HTTPRequestHead, target: ProxyTarget, originForm: String) {
        record.method = head.method.rawValue
        record.host = target.host.lowercased()
        record.port = target.port
        record.path = originForm
        record.url = Self.url(scheme: record.scheme, target: target, originForm: originForm)
        record.requestHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
    }

    /// What is stored is capped (`capture.body_max`), never what is forwarded.
    mutating func requestBodyPart(_ buffer: ByteBuffer) {
        record.requestBodySize += buffer.readableBytes
        let (writer, id, eventLoop) = (writer, record.requestID, eventLoop)
        requestBody.append(buffer) { writer.openBodyFile(requestID: id, .request, on: eventLoop) }
    }

    mutating func responseBodyPart(_ buffer: ByteBuffer) {
        record.responseBodySize += buffer.readableBytes
        let (writer, id, eventLoop) = (writer, record.requestID, eventLoop)
        responseBody.append(buffer) { writer.openBodyFile(requestID: id, .response, on: eventLoop) }
    }

    /// The upstream TLS: the server's choices, and when its handshake ended.
    mutating func tls(_ hello: TLSHello?, doneAt: Date?) {
        if let version = hello?.version { record.tlsVersion = version }
        if let cipher = hello?.cipher { record.tlsCipher = cipher }
        if let doneAt { record.tlsDoneAt = doneAt }
    }

    mutating func connected(to server: SocketAddress?) {
        record.connectedAt = Date()
        record.serverAddress = server.map(Self.describe)
    }

    /// The proxy answered itself (a rule): no upstream, no response headers.
    mutating func answered(_ status: HTTPResponseStatus) {
        record.firstByteAt = Date()
        record.status = Int(status.code)
        record.reason = status.reasonPhrase
    }

    mutating func responseHead(_ head: HTTPResponseHead) {
        record.firstByteAt = Date()
        record.status = Int(head.status.code)
        record.reason = head.status.reasonPhrase
        record.responseHeaders = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
    }

    /// Hands the exchange to the writer, which commits it once its body
    /// files are closed: with `error` when it failed, the `notes` of what
    /// the proxy changed, and the `rules` that acted on it.
    /// `open`: a WebSocket's handshake, whose end comes at its close.
    func submit(error: String? = nil, notes: [String] = [], rules: [String] = [], open: Bool = false) {
        var done = record
        done.endedAt = open ? nil : Date()
        done.error = error
        done.note = notes.joined(separator: "; ").nilIfEmpty
        done.rule = rules.joined(separator: ", ").nilIfEmpty
        done.requestBody = requestBody.inline.isEmpty ? nil : Data(requestBody.inline)
        done.responseBody = responseBody.inline.isEmpty ? nil : Data(responseBody.inline)
        done.requestBodyTruncated = requestBody.truncated
        done.responseBodyTruncated = responseBody.truncated
        done.requestBodyFile = requestBody.file?.name
        done.responseBodyFile = responseBody.file?.name
        requestBody.finish()
        responseBody.finish()
        writer.open?.closed(done.requestID)
        writer.submit(done, files: [requestBody.file, responseBody.file].compactMap { $0 })
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
