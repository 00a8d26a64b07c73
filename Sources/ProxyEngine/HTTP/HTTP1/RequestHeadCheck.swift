import NIOHTTP1

/// What a request head must not carry before it is forwarded (RFC 9112),
/// and the answer for it. NIO's decoder takes these; a proxy must not pass
/// them on, as an origin behind it may read them another way (smuggling).
enum RequestHeadCheck {
    static func problem(_ head: HTTPRequestHead, loopGuard: LoopGuard = .shared) -> (status: HTTPResponseStatus, why: String)? {
        // One pass over the headers: this runs for every request.
        var hosts = 0
        var transferEncoding = false
        var looped = false
        for (name, value) in head.headers {
            switch name.utf8.count {
            case 4 where HopByHop.equalsIgnoringCase(name, "host"): hosts += 1
            case 3 where HopByHop.equalsIgnoringCase(name, "via"): looped = looped || loopGuard.names(value)
            case 17 where HopByHop.equalsIgnoringCase(name, "transfer-encoding"): transferEncoding = true
            default: break
            }
        }
        if hosts > 1 {
            return (.badRequest, "the request has more than one Host header (RFC 9112 §3.2)")
        }
        if transferEncoding, head.version.major == 1, head.version.minor == 0 {
            return (.badRequest, "an HTTP/1.0 request with Transfer-Encoding has faulty framing (RFC 9112 §6.1)")
        }
        if looped {
            return (
                HTTPResponseStatus(statusCode: 508, reasonPhrase: "Loop Detected"),
                "this request has already passed this proxy (its Via names \(loopGuard.pseudonym)): a forwarding loop"
            )
        }
        return nil
    }
}
