import CaptureStore
import Foundation
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// One client connection to the explicit proxy's port (the tunnel's own
/// front end: FrontEndSniffer, then SOCKS5Handshake in the HTTP layer's
/// stead), its bytes in the reads `sizes` says, the dial ending as
/// `outcome` says; then the client's side ends: its input closes, or it
/// falls silent past timeouts.request_head_seconds. Holds what the proxy
/// wrote, dialled and recorded to `InboundModel`.
struct InboundRun {
    enum Ending { case inputClosed, silence }

    let input: [UInt8]
    let sizes: [Int]
    let outcome: DialOutcome
    let ending: Ending

    func run() {
        let channel = EmbeddedChannel()
        let connector = FuzzConnector(loop: channel.embeddedEventLoop, outcome: outcome)
        let sink = RecordingSink()
        let services = ProxyServices(
            stats: TrafficStats(), interception: Interception(), rules: RuleEngine(),
            breakpoints: BreakpointController(store: nil, notifier: nil, groupPath: "/nonexistent"),
            capture: sink, logger: Logger(label: "fuzz-socks5"), connector: connector)
        do {
            try ProxyPipeline.startExplicitProxy(channel, services: services)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        } catch {
            Fuzz.check(false, "cannot set up the front end: \(error)")
        }
        defer {
            _ = try? channel.finish(acceptAlreadyClosed: true)
            for peer in connector.peers { _ = try? peer.finish(acceptAlreadyClosed: true) }
        }
        var offset = 0
        for size in sizes where channel.isActive && offset < input.count {
            let end = min(input.count, offset + size)
            _ = try? channel.writeInbound(ByteBuffer(bytes: input[offset..<end]))
            channel.embeddedEventLoop.run()
            offset = end
        }
        var written: [UInt8] = []
        func drain() {
            while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { written += buffer.readableBytesView }
        }
        func end() {
            switch ending {
            case .inputClosed: channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
            case .silence: channel.embeddedEventLoop.advanceTime(by: .seconds(Int64(services.timeouts.requestHead) + 1))
            }
            channel.embeddedEventLoop.run()
        }
        let model = InboundModel(input)
        let said = model.accepted ? [0x05, 0x00] : model == .noAcceptableMethod ? [0x05, 0xFF] : [UInt8]()
        let what =
            "\(model) for \(hex(input)) in reads of \(sizes.prefix(8))…, \(outcome.end), \(outcome.atOnce ? "at once" : "later"), \(ending)"
        drain()
        switch model {
        case .awaitingGreeting, .awaitingRequest:
            Fuzz.check(
                written == said && channel.isActive && connector.dials.isEmpty && sink.rows.isEmpty,
                "waiting for more, the proxy wrote \(hex(written)), dialled \(connector.dials), is \(channel.isActive ? "open" : "closed"): \(what)"
            )
            end()
            drain()
            Fuzz.check(
                written == said && !channel.isActive,
                "a handshake the client left unfinished: wrote \(hex(written)), open \(channel.isActive): \(what)")
            checkRefusalRow(sink, code: nil, target: nil, what)
        case .badGreeting, .noAcceptableMethod:
            Fuzz.check(
                written == said && !channel.isActive && connector.dials.isEmpty,
                "a greeting refused: wrote \(hex(written)), open \(channel.isActive), dialled \(connector.dials): \(what)")
            checkRefusalRow(sink, code: nil, target: nil, what)
        case let .refused(code):
            let reply: [UInt8] = code.map { [0x05, $0, 0x00, 0x01, 0, 0, 0, 0, 0, 0] } ?? []
            Fuzz.check(
                written == said + reply && !channel.isActive && connector.dials.isEmpty,
                "a request refused: wrote \(hex(written)), open \(channel.isActive), dialled \(connector.dials): \(what)")
            checkRefusalRow(sink, code: code, target: nil, what)
        case let .connect(address, port, _):
            // Once the tunnel opens, the router may dial again (an HTTP request in it goes on its own connection).
            let opened = outcome.boundBytes != nil
            Fuzz.check(
                connector.dials.count == 1 || opened && !connector.dials.isEmpty, "dialled \(connector.dials) for one CONNECT: \(what)")
            guard let target = connector.dials.first else { return }
            Fuzz.check(target.port == port && Self.names(target.host, address), "dialled \(target) for \(address) port \(port): \(what)")
            if !outcome.atOnce {
                // The handshake waits for the dial, whatever the client does meanwhile.
                Fuzz.check(written == said && channel.isActive, "while dialling, wrote \(hex(written)), open \(channel.isActive): \(what)")
                end()
                drain()
                Fuzz.check(
                    written == said && channel.isActive,
                    "while dialling the client ended: wrote \(hex(written)), open \(channel.isActive): \(what)")
                connector.answer()
                channel.embeddedEventLoop.run()
                drain()
            }
            switch outcome.end {
            case let .failed(_, code):
                Fuzz.check(
                    written == said + [0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0] && !channel.isActive,
                    "a failed dial: wrote \(hex(written)), open \(channel.isActive): \(what)")
                checkRefusalRow(sink, code: code, target: target, what)
            case .opened:
                let reply = [0x05, 0x00, 0x00] + (outcome.boundBytes ?? [])
                Fuzz.check(written.starts(with: said + reply), "an opened dial: wrote \(hex(written)): \(what)")
                Fuzz.check(
                    !sink.rows.contains { $0.error?.hasPrefix("SOCKS5:") == true },
                    "an opened dial recorded a refusal: \(sink.rows.map(\.error)): \(what)")
            }
        }
    }

    /// One row says the handshake was refused, with the code it answered or that it closed.
    private func checkRefusalRow(_ sink: RecordingSink, code: UInt8?, target: ProxyTarget?, _ what: String) {
        let errors = sink.rows.compactMap(\.error)
        let words = code.map { String(format: "; answered 0x%02x", $0) } ?? "; closed"
        Fuzz.check(
            sink.rows.count == 1 && errors.count == 1 && errors[0].hasPrefix("SOCKS5: ") && errors[0].hasSuffix(words),
            "a refusal was recorded as \(errors) (\(sink.rows.count) rows), not ending \(words): \(what)")
        guard let row = sink.rows.first else { return }
        Fuzz.check(
            row.host == (target?.host ?? "") && row.port == (target?.port ?? 0), "a refusal recorded for \(row.host):\(row.port): \(what)")
    }

    /// Whether `host`, as the dial names it, is the address the request encoded.
    static func names(_ host: String, _ address: InboundModel.Address) -> Bool {
        switch address {
        case let .ipv4(bytes): return host == dotted(bytes)
        case let .ipv6(bytes):
            var parsed = in6_addr()
            if inet_pton(AF_INET6, host, &parsed) == 1 { return withUnsafeBytes(of: &parsed) { Array($0) } == bytes }
            // An IPv4-mapped address is dialled as the IPv4 address.
            return bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF] && host == dotted(Array(bytes.suffix(4)))
        case let .name(bytes): return host == String(decoding: bytes, as: UTF8.self).lowercased()
        }
    }

    private static func dotted(_ bytes: [UInt8]) -> String { bytes.map(String.init).joined(separator: ".") }
}

func hex<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    bytes.prefix(80).map { String(format: "%02x", $0) }.joined(separator: " ") + (bytes.count > 80 ? " …" : "")
}
