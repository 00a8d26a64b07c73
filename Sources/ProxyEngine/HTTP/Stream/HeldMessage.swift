import BusymateShared
import NIOCore
import NIOHTTP1

/// A request read whole while a breakpoint decides its fate: the body (the
/// head, after the rules, is the exchange's).
struct HeldRequest {
    var body = ByteBuffer()

    func message(_ head: HTTPRequestHead) -> RawHTTPMessage {
        var message = RawHTTPMessage(
            start: .request(method: head.method.rawValue, target: head.uri, version: "HTTP/\(head.version.major).\(head.version.minor)"),
            headers: head.headers.map { ($0.name, $0.value) }, body: Array(body.readableBytesView))
        message.frame(bodyless: false)
        return message
    }
}

/// A response read whole before it goes to the client.
struct HeldResponse {
    /// After the rules' header edits: as the client would get it.
    var head: HTTPResponseHead
    var isHeadRequest: Bool
    var body = ByteBuffer()

    var bodyless: Bool { isHeadRequest || head.status == .noContent || head.status == .notModified }

    var message: RawHTTPMessage {
        var message = RawHTTPMessage(
            start: .response(
                version: "HTTP/\(head.version.major).\(head.version.minor)", status: Int(head.status.code),
                reason: head.status.reasonPhrase),
            headers: head.headers.map { ($0.name, $0.value) }, body: Array(body.readableBytesView))
        message.frame(bodyless: bodyless)
        return message
    }
}

extension RawHTTPMessage {
    /// An edited request's head; nil for a response.
    var requestHead: HTTPRequestHead? {
        guard case let .request(method, target, version) = start else { return nil }
        return HTTPRequestHead(
            version: version == "HTTP/1.0" ? .http1_0 : .http1_1, method: HTTPMethod(rawValue: method), uri: target,
            headers: HTTPHeaders(headers.map { ($0.name, $0.value) }))
    }

    /// An edited response's head; nil for a request.
    var responseHead: HTTPResponseHead? {
        guard case let .response(_, status, reason) = start else { return nil }
        let code = HTTPResponseStatus(statusCode: status)
        return HTTPResponseHead(
            version: .http1_1,
            status: reason.isEmpty || reason == code.reasonPhrase ? code : .custom(code: UInt(status), reasonPhrase: reason),
            headers: HTTPHeaders(headers.map { ($0.name, $0.value) }))
    }
}
