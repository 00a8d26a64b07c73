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
