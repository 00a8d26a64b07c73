import NIOHPACK
import NIOHTTP1
import NIOHTTP2

/// HTTP/1-shaped heads as HTTP/2 header blocks and back (RFC 9113 §8.3),
/// for the frame-level stream layers, which carry no stream channels and
/// so no NIO codec.
enum HTTP2HeaderMapping {
    /// Fields RFC 9113 §8.2.2 forbids in HTTP/2 (with the names `Connection` lists).
    private static let connectionSpecific = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]

    struct BadHost: Error, CustomStringConvertible {
        let count: Int
        var description: String {
            count == 0 ? "the request has no Host header to make its :authority from" : "the request has \(count) Host headers"
        }
    }

    struct BadRequestBlock: Error, CustomStringConvertible {
        let problem: String
        var description: String { "the client's request header block \(problem)" }
    }

    struct BadStatus: Error, CustomStringConvertible {
        let value: String?
        var description: String { "the server's response has \(value.map { "an invalid :status \($0)" } ?? "no :status")" }
    }

    /// A request head as a request's header block: `Host` becomes `:authority`.
    static func request(_ head: HTTPRequestHead, scheme: String) throws -> HPACKHeaders {
        var hosts = 0
        for (name, _) in head.headers where HopByHop.equalsIgnoringCase(name, "host") { hosts += 1 }
        guard hosts == 1, let authority = head.headers.first(name: "host") else { throw BadHost(count: hosts) }
        var block = HPACKHeaders()
        block.reserveCapacity(head.headers.count + 3)
        block.add(name: ":method", value: head.method.rawValue)
        block.add(name: ":scheme", value: scheme)
        block.add(name: ":authority", value: authority)
        block.add(name: ":path", value: head.uri)
        appendRegular(head.headers, to: &block, skippingHost: true)
        return block
    }

    /// A client's request header block as an HTTP/1-shaped head, as NIO's
    /// server codec makes it: `:authority` becomes `Host` (unless there is
    /// one), and a request whose method may carry a body and whose length
    /// is not given gets `content-length: 0` (ended already) or chunked
    /// framing. Also returns `:scheme`.
    static func requestHead(_ block: HPACKHeaders, endStream: Bool) throws -> (HTTPRequestHead, scheme: String) {
        var method: String?, path: String?, scheme: String?, authority: String?
        var hasHost = false, hasLength = false
        for (name, value, _) in block {
            guard name.utf8.first == UInt8(ascii: ":") else {
                if name == "host" { hasHost = true } else if name == "content-length" { hasLength = true }
                continue
            }
            // These become the HTTP/1 request line: no byte that could split it (RFC 9113 §8.3.1).
            guard !value.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
                throw BadRequestBlock(problem: "has a space or control byte in \(name)")
            }
            switch name {
            case ":method": method = value
            case ":path": path = value
            case ":scheme": scheme = value
            case ":authority": authority = value
            default: break
            }
        }
        guard let method, let path, let scheme, let authority else {
            throw BadRequestBlock(problem: "lacks :method, :path, :scheme or :authority")
        }
        var headers = HTTPHeaders()
        headers.reserveCapacity(block.count - 2)
        if !hasHost { headers.add(name: "host", value: authority) }
        let httpMethod = HTTPMethod(rawValue: method)
        switch httpMethod {
        case .GET, .HEAD, .DELETE, .CONNECT, .TRACE: break
        default:
            if !hasLength { headers.add(name: endStream ? "content-length" : "transfer-encoding", value: endStream ? "0" : "chunked") }
        }
        for (name, value, _) in block where name.utf8.first != UInt8(ascii: ":") {
            headers.add(name: name, value: value)
        }
        return (HTTPRequestHead(version: .http2, method: httpMethod, uri: path, headers: headers), scheme)
    }

    /// A response head as a response's header block.
    static func response(_ head: HTTPResponseHead) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(head.headers.count + 1)
        block.add(name: ":status", value: String(head.status.code))
        appendRegular(head.headers, to: &block, skippingHost: false)
        return block
    }

    /// Trailers as a trailing header block.
    static func trailers(_ headers: HTTPHeaders) -> HPACKHeaders {
        var block = HPACKHeaders()
        block.reserveCapacity(headers.count)
        appendRegular(headers, to: &block, skippingHost: false)
        return block
    }

    static func status(of block: HPACKHeaders) throws -> HTTPResponseStatus {
        let value = block.first(name: ":status")
        guard let value, value.utf8.count == 3, let code = Int(value), code >= 100 else { throw BadStatus(value: value) }
        return HTTPResponseStatus(statusCode: code)
    }

    /// A block's fields without its pseudo-header fields.
    static func regular(_ block: HPACKHeaders) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.reserveCapacity(block.count)
        for (name, value, _) in block where name.utf8.first != UInt8(ascii: ":") {
            headers.add(name: name, value: value)
        }
        return headers
    }

    /// HTTP/2 field names are lowercase; connection-specific fields do not cross.
    private static func appendRegular(_ headers: HTTPHeaders, to block: inout HPACKHeaders, skippingHost: Bool) {
        let listed = headers[canonicalForm: "connection"]
        for (name, value) in headers {
            let name = lowercased(name)
            if skippingHost && name == "host" { continue }
            if connectionSpecific.contains(name) || listed.contains(where: { HopByHop.equalsIgnoringCase($0, name) }) { continue }
            block.add(name: name, value: value)
        }
    }

    /// Most names arrive lowercase already (HTTP/2 clients send them so): no copy then.
    private static func lowercased(_ name: String) -> String {
        name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) ? name.lowercased() : name
    }
}
