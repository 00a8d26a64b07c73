import CaptureStore
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// One h2c client connection to the explicit proxy's port: `input` (the
/// preface and frames) in the reads `sizes` says, the origins answering
/// after each read; then the client hangs up.
struct H2CRun {
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    let input: [UInt8]
    let sizes: [Int]

    func run() {
        let channel = EmbeddedChannel()
        let connector = StandInConnector(loop: channel.embeddedEventLoop)
        let services = ProxyServices(
            stats: TrafficStats(), interception: Interception(), rules: RuleEngine(),
            breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
            capture: RecordingSink(), logger: Logger(label: "fuzz-http2"), connector: connector)
        do {
            try ProxyPipeline.startExplicitProxy(channel, services: services)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        } catch {
            Fuzz.check(false, "cannot set up the front end: \(error)")
        }
        defer {
            _ = try? channel.finish(acceptAlreadyClosed: true)
            for origin in connector.origins { _ = try? origin.finish(acceptAlreadyClosed: true) }
        }
        var written: [UInt8] = []
        func drain() {
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
            for origin in connector.origins {
                while (try? origin.readOutbound(as: ByteBuffer.self)) != nil {}
            }
        }
        var offset = 0
        for size in sizes where channel.isActive && offset < input.count {
            let end = min(input.count, offset + size)
            _ = try? channel.writeInbound(ByteBuffer(bytes: input[offset..<end]))
            channel.embeddedEventLoop.run()
            connector.answer()
            channel.embeddedEventLoop.run()
            drain()
            offset = end
        }
        let sent = Frames(input.dropFirst(Self.preface.count))
        let what =
            "\(sent.frames.count) frames (\(sent.frames.prefix(12).map { "\($0.type)/\($0.stream)" })…) in reads of \(sizes.prefix(8))…"

        let got = Frames(written)
        if !written.isEmpty {
            Fuzz.check(
                got.frames.first.map { $0.type == Frames.settings && $0.stream == 0 && $0.flags & 1 == 0 } == true,
                "the proxy's first bytes are not its SETTINGS: \(Fuzz.show(String(decoding: written.prefix(40), as: UTF8.self))): \(what)")
        }
        Fuzz.check(got.rest == 0, "the proxy wrote \(got.rest) bytes that are not a whole frame: \(what)")
        let headers = sent.frames.filter { $0.type == Frames.headers }.count
        Fuzz.check(connector.origins.count <= headers, "\(connector.origins.count) dials for \(headers) HEADERS frames: \(what)")
        let bound = 4096 + 4096 * sent.frames.count
        Fuzz.check(written.count <= bound, "wrote \(written.count) bytes to a client that sent \(sent.frames.count) frames: \(what)")

        // A connection error is told (GOAWAY with its code) and the connection closed (RFC 9113 §5.4.1).
        if got.frames.contains(where: { $0.type == Frames.goaway && ($0.errorCode ?? 0) != 0 }) {
            Fuzz.check(!channel.isActive, "the proxy sent GOAWAY with an error and kept the connection open: \(what)")
        }

        // The client hangs up: every stream ends, and its origin connection with it.
        _ = try? channel.close().wait()
        channel.embeddedEventLoop.run()
        let open = connector.origins.filter(\.isActive).count
        Fuzz.check(open == 0, "\(open) of \(connector.origins.count) origin connections left open after the client left: \(what)")
    }
}
