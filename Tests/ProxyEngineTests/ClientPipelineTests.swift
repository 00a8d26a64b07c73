import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import ProxyEngine

@Suite struct ClientPipelineTests {
    private func makeChannel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try ProxyPipeline.startExplicitProxy(
            channel,
            services: ProxyServices(
                stats: TrafficStats(), interception: Interception(), rules: RuleEngine(),
                breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"), logger: Logger(label: "test")))
        return channel
    }

    private func readResponse(_ channel: EmbeddedChannel) throws -> String {
        var out = ""
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            out += buffer.readString(length: buffer.readableBytes) ?? ""
        }
        return out
    }

    @Test func originFormRequestGetsA400ThatExplainsProxying() throws {
        let channel = try makeChannel()
        try channel.writeInbound(ByteBuffer(string: "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        let response = try readResponse(channel)
        #expect(response.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(response.contains("absolute-form"))
        _ = try? channel.finish()
    }

    @Test func malformedRequestLineGetsA400() throws {
        let channel = try makeChannel()
        _ = try? channel.writeInbound(ByteBuffer(string: "THIS IS NOT HTTP\r\n\r\n"))
        let response = try readResponse(channel)
        #expect(response.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(response.contains("Busymate: the request line does not start with a method"), "\(response)")
        _ = try? channel.finish()
    }

    @Test func aHeaderBlockOver64KiBGetsA431() throws {
        let channel = try makeChannel()
        let big = String(repeating: "a", count: 65 * 1024)
        _ = try? channel.writeInbound(ByteBuffer(string: "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Big: \(big)\r\n\r\n"))
        let response = try readResponse(channel)
        #expect(response.hasPrefix("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "\(response.prefix(80))")
        #expect(response.contains("over the limit (64 KiB)"))
        _ = try? channel.finish()
    }

    @Test func connectWithoutPortIsRejected() throws {
        let channel = try makeChannel()
        try channel.writeInbound(ByteBuffer(string: "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"))
        let response = try readResponse(channel)
        #expect(response.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        #expect(response.contains("host:port"))
        _ = try? channel.finish()
    }

    @Test func absoluteFormParsing() {
        let parsed = ProxyTarget.parseAbsoluteForm("http://Example.com:8080/a/b?c=d#frag")
        #expect(parsed?.target == ProxyTarget(host: "Example.com", port: 8080))
        #expect(parsed?.originForm == "/a/b?c=d")
        #expect(ProxyTarget.parseAbsoluteForm("http://example.com")?.originForm == "/")
        #expect(ProxyTarget.parseAbsoluteForm("http://example.com?x=1")?.originForm == "/?x=1")
        #expect(ProxyTarget.parseAbsoluteForm("http://[::1]:81/")?.target == ProxyTarget(host: "::1", port: 81))
        #expect(ProxyTarget.parseAbsoluteForm("/relative") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("ftp://example.com/") == nil)
        #expect(ProxyTarget.parseAuthority("example.com:443", defaultPort: nil) == ProxyTarget(host: "example.com", port: 443))
        #expect(ProxyTarget.parseAuthority("example.com:0", defaultPort: nil) == nil)
        #expect(ProxyTarget.parseAuthority("exa mple.com:443", defaultPort: nil) == nil)
        #expect(
            ProxyTarget.parseAbsoluteForm("HTTP://user:pw@Host.example:8080/x")?.target == ProxyTarget(host: "Host.example", port: 8080))
        #expect(ProxyTarget.parseAbsoluteForm("http://bücher.example/")?.target.host == "bücher.example")
        #expect(ProxyTarget.parseAbsoluteForm("http://h.example:65536/") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("http://h.example:/") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("http://h.example:8a/") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("http:/h.example/") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("http://") == nil)
        #expect(ProxyTarget.parseAbsoluteForm("http://h.example#top")?.originForm == "/")
        #expect(ProxyTarget.parseAuthority("[::1]x", defaultPort: 443) == nil)
        #expect(ProxyTarget.parseAuthority("[fe80::1%eth0]", defaultPort: 443) == ProxyTarget(host: "fe80::1%eth0", port: 443))
    }

    @Test func hopByHopHeadersAreStripped() {
        var headers = HTTPHeaders([
            ("Connection", "close, X-Secret"), ("X-Secret", "1"), ("Proxy-Connection", "keep-alive"),
            ("Keep-Alive", "timeout=5"), ("Accept", "*/*"), ("Content-Length", "3"),
        ])
        HopByHop.strip(&headers)
        #expect(headers.map(\.name).sorted() == ["Accept", "Content-Length"])
        // Names in any case; framing headers stay even when listed; order kept.
        var mixed = HTTPHeaders([
            ("X-A", "1"), ("CONNECTION", "x-secret, Transfer-Encoding"), ("x-SECRET", "2"), ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"), ("X-B", "3"),
        ])
        HopByHop.strip(&mixed)
        #expect(mixed.map(\.name) == ["X-A", "Transfer-Encoding", "X-B"])
        var plain = HTTPHeaders([("Host", "h"), ("Accept", "*/*")])
        HopByHop.strip(&plain)
        #expect(plain.map(\.name) == ["Host", "Accept"])
    }
}
