import CaptureStore
import Foundation
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1

// The HTTP/1 request path as the tunnel reads it: the bytes of a client
// connection go into an EmbeddedChannel carrying the HTTP layer
// `ProxyPipeline.installHTTP` builds for the explicit proxy, or for an
// intercepted tunnel behind TLS: NIO's HTTPResponseEncoder and
// ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy:
// .forwardBytes)), RequestLineTap, HTTP1ServerConnection and
// HTTPExchangeHandler, all of them the tunnel's own, installed by the tunnel's own owner.
//
// Upstream dials go through `RefusingConnector`: a CONNECT that passes
// through reaches the real ConnectionRouter, which answers 502. `HeadStage`
// (below) stands in front of HTTPExchangeHandler and checks each head with
// the functions the tunnel uses before it dials: CONNECT target parsing and
// the interception decision; destination() (absolute- or origin-form), the
// rules' plan and header edits, map_local's file choice, hop-by-hop
// stripping and the head `UpstreamRequest` makes (Host, Via, map_remote,
// upstream_proxy's absolute-form). Requests that a block rule answers go on
// to the real HTTPExchangeHandler (which blocks them: nothing dials); the
// stage answers the others itself with a 502.
//
// Properties checked on the way (a failure aborts: a crash for libFuzzer):
// - a CONNECT target's description parses back to the same target;
// - the URL rules match (ExchangeCapture.url) names the host and port the
//   request goes to, as URLPattern.Subject reads it: else a rule for that
//   host could be dodged;
// - hop-by-hop stripping leaves none of the listed headers behind and keeps
//   every other header;
// - the head that would go upstream, encoded by NIO's HTTPRequestEncoder,
//   parses back (NIO's decoder) to the same method, target and headers
//   (but framing, which the encoder sets) once the request has ended;
// - headers as the capture store keeps them (ExchangeRecord.encodeHeaders)
//   decode back to the same pairs;
// - map_local never picks a file outside its directory;
// - a request held at a breakpoint (HeldRequest.message), saved unchanged,
//   reads back, may replace itself, and goes where it was going.
@testable import BusymateShared
@testable import ProxyEngine

/// Rules the stage plans with: every kind, on hosts the dictionary and
/// corpus use.
let stageSettingsJSON = """
    {
      "ssl_proxying": {"include": ["*.example.com", "api.test", "[::1]"], "exclude": ["static.example.com"]},
      "upstream_proxy": {"host": "127.0.0.1", "port": 3128, "username": "u", "password": "p", "bypass": ["*.internal", "localhost"]},
      "rules": [
        {"name": "ads", "action": "block", "match": "ads.example.com/*", "status": 451},
        {"name": "mock", "action": "map_local", "match": "cdn.example.com/static/*", "directory": "\(FileFixture.root)"},
        {"name": "one", "action": "map_local", "match": "cdn.example.com/one.json", "file": "\(FileFixture.root)/a.json"},
        {"name": "staging", "action": "map_remote", "match": "api.test/v1/*", "to": "https://staging.example.net:8443/v2/"},
        {"name": "loopback", "action": "map_remote", "match": "*.example.org/*", "to": "http://[::1]:8080"},
        {"name": "plain", "action": "map_remote", "match": "https://secure.example.com/*", "to": "http://127.0.0.1:9000/"},
        {"name": "dns", "action": "host_override", "match": "*.test/*", "address": "127.0.0.1"},
        {"name": "hdrs", "action": "headers", "match": "*.example.com/*",
         "request": {"remove": ["Cookie", "x-drop"], "set": {"X-Set": "1", "Accept": "*/*"}, "add": {"X-Added": "yes", "Connection": "x-set"}},
         "response": {"set": {"Cache-Control": "no-store"}}},
        {"name": "hop", "action": "headers", "match": "*/*", "request": {"add": {"Keep-Alive": "timeout=5", "TE": "trailers"}}},
        {"name": "off", "action": "block", "enabled": false, "match": "*/*"}
      ]
    }
    """

/// What the real HTTPExchangeHandler plans with: a block for every URL, so
/// that it answers instead of dialling; `drop` for one host (it hangs up).
let forwardSettingsJSON = """
    {"rules": [
      {"name": "drop", "action": "drop", "match": "drop.example.com/*"},
      {"name": "stop", "action": "block", "match": "*/*", "status": 403},
      {"name": "stop-bare", "action": "block", "match": "*", "status": 403}
    ]}
    """

/// A directory for the map_local rules, with a file, a subdirectory and a
/// symlink that leads out of it.
enum FileFixture {
    static let root: String = {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("busymate-fuzz-http1-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: base + "/root/js", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: base + "/root/a.json", contents: Data("{}".utf8))
        _ = FileManager.default.createFile(atPath: base + "/root/index.html", contents: Data("<p>".utf8))
        _ = FileManager.default.createFile(atPath: base + "/root/js/app.js", contents: Data("1".utf8))
        _ = FileManager.default.createFile(atPath: base + "/secret", contents: Data("no".utf8))
        try? FileManager.default.createSymbolicLink(atPath: base + "/root/out", withDestinationPath: base + "/secret")
        atexit {
            try? FileManager.default.removeItem(
                atPath: FileManager.default.temporaryDirectory.appendingPathComponent("busymate-fuzz-http1-\(getpid())").path)
        }
        return base + "/root"
    }()
    static let realRoot: String = {
        guard let real = realpath(root, nil) else { return root }
        defer { free(real) }
        return String(cString: real)
    }()
}

func settings(_ json: String) -> AppSettings {
    do {
        return try AppSettings.decode(json).settings
    } catch {
        fatalError("the harness's own settings do not decode: \(error)")
    }
}

let stageSettings = settings(stageSettingsJSON)
let stageRules: RuleEngine = {
    let rules = RuleEngine()
    rules.apply(stageSettings)
    return rules
}()
let forwardRules: RuleEngine = {
    let rules = RuleEngine()
    rules.apply(settings(forwardSettingsJSON))
    return rules
}()
let interception: Interception = {
    let interception = Interception()
    interception.apply(stageSettings)
    return interception
}()
let breakpoints = BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent")
let stats = TrafficStats()
let logger = Logger(label: "fuzz")
/// FUZZ_STRICT=1: check known findings too (see fuzz/crashes/).
let strict = getenv("FUZZ_STRICT") != nil
let interceptedTarget = ProxyTarget(host: "secure.example.com", port: 443)
let upstreamTLS: UpstreamTLS = {
    guard let upstream = interception.upstreamTLS else { fatalError("no upstream TLS context") }
    return upstream
}()

enum Front { case explicitProxy, intercepted }

/// Nothing dials from an EmbeddedChannel: a CONNECT that passes through
/// gets the router's 502.
struct RefusingConnector: UpstreamConnector {
    struct Refused: Error {}
    func connect(
        _ dial: UpstreamDial, override: String?, autoRead: Bool, halfClosure: Bool, on eventLoop: EventLoop,
        initialize: @escaping @Sendable (Channel) throws -> Void
    ) -> EventLoopFuture<Channel> {
        eventLoop.makeFailedFuture(Refused())
    }
}

let services = ProxyServices(
    stats: stats, interception: interception, rules: forwardRules, breakpoints: breakpoints, logger: logger,
    connector: RefusingConnector())

/// The tunnel's own HTTP layer (ProxyPipeline installs it, as for a real
/// connection) with `HeadStage` in front of the exchange handler.
func makeChannel(_ front: Front) throws -> EmbeddedChannel {
    let channel = EmbeddedChannel()
    let owner = ProxyPipeline(channel: channel, services: services)
    let route: ForwardRoute = front == .explicitProxy ? .absoluteForm : .intercepted(interceptedTarget, upstreamTLS)
    let exchange = try owner.installHTTP(route: route, position: .last)
    try channel.pipeline.syncOperations.addHandler(HeadStage(front: front, forward: exchange), position: .before(exchange))
    return channel
}

/// Stands in front of HTTPExchangeHandler: see the top.
final class HeadStage: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private enum State {
        /// HTTP parts; `swallowing` while the rest of a request this stage answered arrives.
        case http(swallowing: Bool)
        /// A CONNECT this stage took: waiting for its end.
        case connecting(ProxyTarget)
        /// After the CONNECT: raw bytes, as the glue would see them.
        case tunnel
    }

    private var state = State.http(swallowing: false)
    /// The head `forward` would send upstream and the client's, checked
    /// once the request has ended: NIO's decoder hands a head on before it
    /// refuses, say, its Transfer-Encoding, and then nothing goes upstream.
    private var pendingWireCheck: (HTTPRequestHead, HTTPRequestHead)?
    private let front: Front
    private let forward: HTTPExchangeHandler

    init(front: Front, forward: HTTPExchangeHandler) {
        self.front = front
        self.forward = forward
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .tunnel:
            // The decoder's left-over bytes and everything after: the client's TLS.
            context.fireChannelRead(data)
        case .connecting:
            // The real handler routes the CONNECT at its end; bytes after it are the router's.
            if case .end = Self.unwrapInboundIn(data) { state = .tunnel }
            context.fireChannelRead(data)
        case let .http(swallowing):
            switch Self.unwrapInboundIn(data) {
            case let .head(head):
                if front == .explicitProxy && head.method == .CONNECT {
                    connect(head, data: data, context: context)
                } else {
                    request(head, data: data, context: context)
                }
            case .body:
                if !swallowing { context.fireChannelRead(data) }
            case .end:
                // The decoder took the whole request: what went upstream must read back.
                if let (upstream, client) = pendingWireCheck {
                    pendingWireCheck = nil
                    checkWireRoundTrip(upstream, client: client)
                }
                if swallowing { state = .http(swallowing: false) } else { context.fireChannelRead(data) }
            }
        }
    }

    // MARK: CONNECT (checked here, then routed by the real handler)

    private func connect(_ head: HTTPRequestHead, data: NIOAny, context: ChannelHandlerContext) {
        guard let target = ProxyTarget.parseAuthority(head.uri[...], defaultPort: nil) else {
            // HTTPExchangeHandler refuses it itself (400, close).
            context.fireChannelRead(data)
            return
        }
        Fuzz.check(
            ProxyTarget.parseAuthority(target.description[...], defaultPort: nil) == target,
            "CONNECT \(Fuzz.show(head.uri)): target \(Fuzz.show(target.description)) does not parse back")
        Fuzz.check(
            target.host.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F } && (1...65535).contains(target.port),
            "CONNECT \(Fuzz.show(head.uri)): host \(Fuzz.show(target.host)) port \(target.port)")
        _ = interception.decide(host: target.host)
        if let rule = stageRules.first(.hostOverride, for: "https://\(target)/", exchange: nil) {
            Fuzz.check(rule.kind == .hostOverride, "first(.hostOverride) gave a \(rule.kind) rule")
        }
        _ = interception.upstreamProxy(for: target.host)
        _ = ExchangeRecord.encodeHeaders(head.headers.map { ($0.name, $0.value) })
        state = .connecting(target)
        context.fireChannelRead(data)
    }

    // MARK: requests (HTTPExchangeHandler.requestHead and UpstreamRequest)

    private func request(_ received: HTTPRequestHead, data: NIOAny, context: ChannelHandlerContext) {
        pendingWireCheck = nil
        var head = received
        head.headers.remove(name: HTTPExchangeHandler.resentFromHeader)
        guard let (target, originForm) = forward.destination(of: head) else {
            // HTTPExchangeHandler refuses it itself (400).
            context.fireChannelRead(data)
            return
        }
        // Two Hosts, HTTP/1.0 with Transfer-Encoding, a loop: refused there too.
        if RequestHeadCheck.problem(head) != nil {
            context.fireChannelRead(data)
            return
        }
        let scheme = front == .intercepted ? "https" : "http"
        let url = ExchangeCapture.url(scheme: scheme, target: target, originForm: originForm)
        // Known, fuzz/crashes/http1/README.md: an intercepted `OPTIONS *`
        // gets the URL https://host* (rules match it as host "host*").
        if !(front == .intercepted && originForm == "*") || strict {
            checkSubject(url, target: target, uri: head.uri)
        }
        if front == .explicitProxy {
            Fuzz.check(originForm.hasPrefix("/"), "\(Fuzz.show(head.uri)): origin-form \(Fuzz.show(originForm))")
            if let again = ProxyTarget.parseAbsoluteForm(url) {
                Fuzz.check(
                    again.target == target && again.originForm == originForm,
                    "\(Fuzz.show(head.uri)): URL \(Fuzz.show(url)) parses to \(again.target) \(Fuzz.show(again.originForm))")
            } else {
                Fuzz.check(false, "\(Fuzz.show(head.uri)): URL \(Fuzz.show(url)) does not parse back")
            }
        }
        let plan = stageRules.plan(for: url, exchange: nil)
        plan.requestEdits?.apply(to: &head.headers)
        if let edits = plan.requestEdits { checkEdits(edits, head.headers) }
        checkRecordedHeaders(head.headers)
        checkHeld(head, target: target, originForm: originForm, plan: plan)
        if let rule = plan.mapLocal, case let .mapLocal(file, directory) = rule.action {
            if case let .success(real) = MapLocal.file(for: rule, file: file, directory: directory, path: originForm), file == nil {
                Fuzz.check(real.hasPrefix(FileFixture.realRoot + "/"), "map_local \(Fuzz.show(originForm)) served \(Fuzz.show(real))")
            }
        } else if plan.block == nil {
            upstreamHead(head, target: target, originForm: originForm, plan: plan)
        }
        if forwardRules.plan(for: url, exchange: nil).block != nil {
            context.fireChannelRead(NIOAny(HTTPServerRequestPart.head(received)))
        } else {
            // No rule of the real handler's answers this URL: it would dial.
            state = .http(swallowing: true)
            ProxyReply.write(.badGateway, "fuzz: not dialled", close: !head.isKeepAlive, context: context, wrap: wrapOutboundOut)
        }
    }

    /// The rules and breakpoints match the URL; the request goes to `target`.
    private func checkSubject(_ url: String, target: ProxyTarget, uri: String) {
        let subject = URLPattern.Subject(url)
        let host = Array(SSLProxyMatcher.normalize(target.host).utf8)
        Fuzz.check(
            subject.host == host && subject.port == target.port,
            "\(Fuzz.show(uri)): URL \(Fuzz.show(url)) reads as host \(Fuzz.show(String(decoding: subject.host, as: UTF8.self))):\(subject.port), "
                + "but the request goes to \(Fuzz.show(target.host)):\(target.port)")
    }

    private func checkEdits(_ edits: Rule.HeaderEdits, _ headers: HTTPHeaders) {
        for (name, value) in edits.set {
            Fuzz.check(headers[name].contains(value), "set \(name) missing")
        }
        for name in edits.remove
        where !edits.set.contains(where: { $0.0.lowercased() == name.lowercased() })
            && !edits.add.contains(where: { $0.0.lowercased() == name.lowercased() })
        {
            Fuzz.check(!headers.contains(name: name), "removed \(name) still there")
        }
    }

    private func checkRecordedHeaders(_ headers: HTTPHeaders) {
        let pairs = headers.map { ($0.name, $0.value) }
        let decoded = ExchangeRecord.decodeHeaders(ExchangeRecord.encodeHeaders(pairs))
        Fuzz.check(decoded.elementsEqual(pairs, by: ==), "recorded headers \(pairs) decode as \(decoded)")
    }

    /// A breakpoint shows the request as text (HeldRequest.message(_:)); saved
    /// unchanged, it must read back and go where it was going.
    private func checkHeld(_ head: HTTPRequestHead, target: ProxyTarget, originForm: String, plan: RulePlan) {
        let message = HeldRequest().message(head)
        let text = Fuzz.show(String(decoding: message.rendered(), as: UTF8.self))
        guard let reread = try? RawHTTPMessage.parse(message.rendered(), as: .request) else {
            Fuzz.check(false, "a held request saved unchanged is refused: \(text)")
            return
        }
        // The editor's format trims spaces around values; nothing else may change.
        let trimmed = message.headers.map { ($0.name, $0.value.trimmingCharacters(in: CharacterSet(charactersIn: " \t"))) }
        Fuzz.check(
            reread.start == message.start && reread.body == message.body && reread.headers.elementsEqual(trimmed, by: ==),
            "a held request saved unchanged reads back otherwise: \(text)")
        // Known, fuzz/crashes/http1/README.md: an absolute-form target other
        // than http:// (https:// inside an intercepted tunnel) is refused.
        if message.requestHead.map({ $0.uri.lowercased().hasPrefix("http://") || $0.uri.hasPrefix("/") || $0.uri == "*" }) == true || strict
        {
            Fuzz.check(
                (try? reread.checkEditable(replacing: message)) != nil, "a held request saved unchanged cannot replace itself: \(text)")
        }
        let destination = reread.requestHead.flatMap { forward.destination(of: $0) }
        Fuzz.check(
            destination?.target == target && destination?.originForm == originForm,
            "a held request saved unchanged goes to \(String(describing: destination)), not \(target) \(Fuzz.show(originForm)): \(text)")
    }

    /// What goes upstream (the tunnel's own `UpstreamRequest`), to be
    /// encoded and parsed back once the request has ended; and hop-by-hop
    /// stripping on its own.
    private func upstreamHead(_ head: HTTPRequestHead, target: ProxyTarget, originForm: String, plan: RulePlan) {
        var stripped = head.headers
        HopByHop.strip(&stripped)
        checkStripped(head.headers, stripped)
        let route: ForwardRoute = front == .intercepted ? .intercepted(interceptedTarget, upstreamTLS) : .absoluteForm
        let upstream = UpstreamRequest(
            ClientRequest(head: head, target: target, originForm: originForm), route: route, plan: plan, interception: interception)
        pendingWireCheck = (upstream.head, head)
    }

    private func checkStripped(_ original: HTTPHeaders, _ stripped: HTTPHeaders) {
        var listed = Set(HopByHop.names)
        for (name, value) in original where ["connection", "proxy-connection"].contains(name.lowercased()) {
            for token in value.split(separator: ",") {
                let t = token.trimmingCharacters(in: CharacterSet(charactersIn: " \t")).lowercased()
                if !t.isEmpty && t != "transfer-encoding" && t != "content-length" { listed.insert(t) }
            }
        }
        for (name, _) in stripped {
            Fuzz.check(!listed.contains(name.lowercased()), "hop-by-hop \(Fuzz.show(name)) kept (listed: \(listed.sorted()))")
        }
        let kept = original.filter { !listed.contains($0.name.lowercased()) }
        Fuzz.check(
            kept.map { "\($0.name): \($0.value)" } == stripped.map { "\($0.name): \($0.value)" },
            "strip dropped more than the hop-by-hop headers: \(original.map(\.name)) became \(stripped.map(\.name))")
    }

    /// The request the proxy writes upstream must read as the same request.
    private func checkWireRoundTrip(_ upstream: HTTPRequestHead, client: HTTPRequestHead) {
        let encoder = EmbeddedChannel(handler: HTTPRequestEncoder())
        defer { _ = try? encoder.finish(acceptAlreadyClosed: true) }
        do {
            try encoder.writeOutbound(HTTPClientRequestPart.head(upstream))
            try encoder.writeOutbound(HTTPClientRequestPart.end(nil))
        } catch {
            Fuzz.check(false, "cannot encode \(upstream): \(error)")
        }
        var wire = ByteBuffer()
        while var chunk = try? encoder.readOutbound(as: ByteBuffer.self) { wire.writeBuffer(&chunk) }
        let decoder = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
        defer { _ = try? decoder.finish(acceptAlreadyClosed: true) }
        let text = String(decoding: wire.readableBytesView, as: UTF8.self)
        do {
            try decoder.writeInbound(wire)
        } catch {
            Fuzz.check(
                false,
                "the upstream request does not parse (\(error)); client sent \(Fuzz.show("\(client)")); proxy wrote \(Fuzz.show(text))")
        }
        guard case let .head(parsed)? = try? decoder.readInbound(as: HTTPServerRequestPart.self) else {
            Fuzz.check(false, "the upstream request has no head; proxy wrote \(Fuzz.show(text))")
            return
        }
        Fuzz.check(
            parsed.method == upstream.method && parsed.uri == upstream.uri,
            "upstream request line reads back as \(parsed.method) \(Fuzz.show(parsed.uri)); proxy wrote \(Fuzz.show(text))")
        // The encoder sets the framing headers itself (as it does upstream).
        func unframed(_ headers: HTTPHeaders) -> [String] {
            headers.filter { !["content-length", "transfer-encoding"].contains($0.name.lowercased()) }.map { "\($0.name): \($0.value)" }
        }
        Fuzz.check(
            unframed(parsed.headers) == unframed(upstream.headers),
            "upstream headers read back as \(parsed.headers); proxy wrote \(Fuzz.show(text))")
    }
}

/// One connection: `input` in `chunk`-byte reads (0: one read), with the
/// drain (ChannelShouldQuiesceEvent) begun first when `quiesce`.
func serve(_ front: Front, _ input: UnsafeRawBufferPointer, chunk: Int, quiesce: Bool) {
    let channel: EmbeddedChannel
    do {
        channel = try makeChannel(front)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
    } catch {
        fatalError("cannot set up the pipeline: \(error)")
    }
    if quiesce { channel.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
    var offset = 0
    while offset < input.count, channel.isActive {
        let end = chunk == 0 ? input.count : min(input.count, offset + chunk)
        let buffer = ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: input[offset..<end]))
        _ = try? channel.writeInbound(buffer)
        while (try? channel.readOutbound(as: ByteBuffer.self)) != nil {}
        offset = end
    }
    // The drain's one-second wait for a first request, and the end of input.
    channel.embeddedEventLoop.advanceTime(by: .seconds(2))
    _ = try? channel.finish(acceptAlreadyClosed: true)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        // One read; small reads (ByteToMessageDecoder's partial heads, and the
        // left-over bytes after a CONNECT); and the intercepted tunnel's pipeline.
        serve(.explicitProxy, input, chunk: 0, quiesce: input.count % 4 == 3)
        serve(.explicitProxy, input, chunk: 1 + input.count % 7, quiesce: false)
        serve(.intercepted, input, chunk: 1 + input.count % 5, quiesce: input.count % 4 == 1)
    }
}
