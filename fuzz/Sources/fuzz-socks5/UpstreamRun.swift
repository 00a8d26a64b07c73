import FuzzSupport
import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// The client side: SOCKS5ClientHandshake opening a tunnel to `target`
/// through an upstream SOCKS5 proxy whose answers are `answers`, in the
/// reads `sizes` says (cut, too, where each answer ends: a server answers a
/// step only once the client has taken it). Holds what the client wrote,
/// how its promise ended and the bytes it handed on to `UpstreamModel`.
struct UpstreamRun {
    static let targets = [
        ProxyTarget(host: "api.example.com", port: 443), ProxyTarget(host: "10.0.0.1", port: 80), ProxyTarget(host: "::1", port: 8080),
        ProxyTarget(host: "2001:db8::1", port: 1), ProxyTarget(host: "xn--bcher-kva.example", port: 65535),
        ProxyTarget(host: String(repeating: "a", count: 63) + "." + String(repeating: "b", count: 63) + ".example", port: 8443),
        ProxyTarget(host: "localhost", port: 3000), ProxyTarget(host: "127.0.0.1", port: 443),
    ]
    static let username = "user"
    static let password = "pässwörd"

    let answers: [UInt8]
    let credentials: Bool
    let target: ProxyTarget
    let sizes: [Int]

    /// What comes after the handshake, as the tunnel's next handler gets it.
    final class Collector: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        var bytes: [UInt8] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { bytes += unwrapInboundIn(data).readableBytesView }
    }

    func run() {
        let channel = EmbeddedChannel()
        let promise = channel.eventLoop.makePromise(of: Void.self)
        var result: Result<Void, Error>?
        promise.futureResult.assumeIsolated().whenComplete { result = $0 }
        let handshake = SOCKS5ClientHandshake(
            target: target, username: credentials ? Self.username : nil,
            password: credentials ? Self.password : nil, promise: promise)
        let collector = Collector()
        do {
            try channel.pipeline.syncOperations.addHandler(handshake)
            try channel.pipeline.syncOperations.addHandler(collector)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1080)).wait()
        } catch {
            Fuzz.check(false, "cannot set up the client: \(error)")
        }
        defer { _ = try? channel.finish(acceptAlreadyClosed: true) }
        let model = UpstreamModel(answers, credentials: credentials)
        var cuts = Set(model.steps)
        var offset = 0
        for size in sizes {
            offset += size
            cuts.insert(offset)
        }
        var start = 0
        for cut in cuts.sorted() + [answers.count] where cut > start && cut <= answers.count && channel.isActive {
            _ = try? channel.writeInbound(ByteBuffer(bytes: answers[start..<cut]))
            channel.embeddedEventLoop.run()
            start = cut
        }
        var written: [UInt8] = []
        while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
        let what = "\(model.end) for \(hex(answers)) to \(target), credentials \(credentials)"

        var expected: [UInt8] = [0x05, 0x01, credentials ? 0x02 : 0x00]
        if model.authenticated {
            expected +=
                [0x01, UInt8(Self.username.utf8.count)] + Array(Self.username.utf8) + [UInt8(Self.password.utf8.count)]
                + Array(Self.password.utf8)
        }
        Fuzz.check(written.starts(with: expected), "the client wrote \(hex(written)), not \(hex(expected)) first: \(what)")
        if model.requested {
            // The CONNECT reads back, with the inbound side's own parser, as the target.
            let request = ByteBuffer(bytes: written.dropFirst(expected.count))
            guard case let .connect(read, _, length) = SOCKS5Message.request(request) else {
                Fuzz.check(false, "the client's CONNECT \(hex(written.dropFirst(expected.count))) does not parse: \(what)")
                return
            }
            Fuzz.check(
                read == target && length == request.readableBytes,
                "the client's CONNECT reads as \(read), \(length) bytes of \(request.readableBytes): \(what)")
        } else {
            Fuzz.check(written == expected, "the client wrote \(hex(written)) before it could: \(what)")
        }

        switch model.end {
        case .waiting:
            Fuzz.check(result == nil && channel.isActive, "waiting for the proxy, the promise is \(String(describing: result)): \(what)")
            channel.close(promise: nil)
            channel.embeddedEventLoop.run()
            guard case .failure? = result else {
                Fuzz.check(false, "the proxy closed mid-handshake, and the promise is \(String(describing: result)): \(what)")
                return
            }
        case .refused:
            guard case .failure? = result, !channel.isActive else {
                Fuzz.check(false, "a refusal left the promise \(String(describing: result)), open \(channel.isActive): \(what)")
                return
            }
        case let .established(consumed):
            guard case .success? = result, channel.isActive else {
                Fuzz.check(false, "the tunnel opened, and the promise is \(String(describing: result)), open \(channel.isActive): \(what)")
                return
            }
            // The server's first bytes of the tunnel reach whatever reads it, all of them.
            channel.pipeline.syncOperations.removeHandler(handshake, promise: nil)
            channel.embeddedEventLoop.run()
            Fuzz.check(
                collector.bytes == Array(answers.dropFirst(consumed)),
                "after the handshake the tunnel got \(hex(collector.bytes)), not \(hex(answers.dropFirst(consumed))): \(what)")
        }
    }
}
