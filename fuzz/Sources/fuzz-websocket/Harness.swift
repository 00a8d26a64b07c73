// The WebSocket layer (WebSocketSession: NIO's frame decoder, the frame writer,
// the relays, the assembler and permessage-deflate's inflater): every
// frame a client or a server sends after a `101` goes through it.
//
// The input is a script: a first byte (bit 0: the socket negotiated
// permessage-deflate), then chunks, each a header byte (bit 7: from the
// server, else the client; bits 0-6: length - 1) and its bytes, written to
// that side as they came from the network. Then both sides close.
//
// Properties:
// - it never traps, whatever the bytes (masks, lengths, fragments, RSV
//   bits, garbage compressed data, a deflate bomb);
// - a message it reports is no larger than the inflate limit;
// - when the proxy ends the socket (a violation), both sides are closed,
//   and each side still open was sent the close (code, reason) as its last
//   frame (a server's masked);
// - the close is reported once, after both sides have gone.
import FuzzSupport
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket

@testable import CaptureStore
@testable import ProxyEngine

final class Observer: WebSocketObserver {
    /// Each direction's message so far.
    var messageBytes = (client: 0, server: 0)
    var closings: [WebSocketClosing] = []
    func fragment(_ fragment: WebSocketFragment, fromClient: Bool) {
        var bytes = fromClient ? messageBytes.client : messageBytes.server
        bytes += fragment.payload.readableBytes
        Fuzz.check(bytes <= WebSocketLimits.inflatedMessage + (1 << 20), "a message of \(bytes) bytes passed the inflate limit")
        if fragment.last { bytes = 0 }
        if fromClient { messageBytes.client = bytes } else { messageBytes.server = bytes }
    }
    func control(_ opcode: WebSocketOpcode, fromClient: Bool) {}
    func message(_ opcode: WebSocketMessageRecord.Opcode, _ payload: ByteBuffer, fromClient: Bool, origin: WebSocketMessageRecord.Origin)
        -> Int?
    { nil }
    func readComplete() {}
    func closed(_ closing: WebSocketClosing) { closings.append(closing) }
    var isBehind: Bool { false }
    func whenCaughtUp(_ body: @escaping @Sendable () -> Void) { body() }
}

func written(_ channel: EmbeddedChannel) -> [UInt8] {
    var all: [UInt8] = []
    while let buffer = try? channel.readOutbound(as: ByteBuffer.self) { all += buffer.readableBytesView }
    return all
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        guard let first = bytes.first else { return }
        let loop = EmbeddedEventLoop()
        let client = EmbeddedChannel(loop: loop), server = EmbeddedChannel(loop: loop)
        let observer = Observer()
        let handshake = WebSocketHandshake(extensions: first & 1 == 1 ? "permessage-deflate" : nil, deflate: first & 1 == 1)
        guard
            let session = try? WebSocketSession(
                handshake: handshake, observer: observer, stats: TrafficStats(), logger: Logger(label: "fuzz"),
                eventLoop: loop)
        else { return }
        let relays = session.makeRelays()
        do {
            try client.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)), WebSocketFrameWriter(), relays.client,
            ])
            try server.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)), WebSocketFrameWriter(), relays.server,
            ])
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        } catch {
            Fuzz.check(false, "the harness could not set up its channels: \(error)")
        }
        var toClient: [UInt8] = [], toServer: [UInt8] = []
        var at = 1
        while at < bytes.count {
            let header = bytes[at]
            let n = Int(header & 0x7F) + 1
            let chunk = Array(bytes[(at + 1)..<min(bytes.count, at + 1 + n)])
            at += 1 + n
            let side = header & 0x80 == 0 ? client : server
            guard side.isActive else { continue }
            let open = (client: client.isActive, server: server.isActive)
            let closedBefore = !observer.closings.isEmpty
            // A decoder error closes the channel: what it throws is the test's to ignore.
            try? side.writeInbound(ByteBuffer(bytes: chunk))
            loop.run()
            toClient += written(client)
            toServer += written(server)
            // This chunk made the proxy end the socket: both sides are closed, and each
            // side that was open was sent the close (code and reason) as its last frame.
            guard !closedBefore, let closing = observer.closings.first, closing.closedBy == "proxy", let code = closing.closeCode else {
                continue
            }
            Fuzz.check(!client.isActive && !server.isActive, "the proxy ended the socket but a side is still open")
            let payload = [UInt8(code >> 8), UInt8(code & 0xFF)] + Array((closing.closeReason ?? "").utf8)
            if open.client {
                Fuzz.check(
                    Array(toClient.suffix(payload.count + 2)) == [0x88, UInt8(payload.count)] + payload,
                    "the client was not sent the close last")
            }
            if open.server {
                let tail = Array(toServer.suffix(payload.count + 6))
                Fuzz.check(
                    tail.count == payload.count + 6 && tail[0] == 0x88 && tail[1] == 0x80 | UInt8(payload.count),
                    "the server was not sent a masked close last")
            }
        }
        if client.isActive { _ = try? client.close().wait() }
        loop.run()
        if server.isActive { _ = try? server.close().wait() }
        loop.run()
        toClient += written(client)
        toServer += written(server)
        Fuzz.check(observer.closings.count == 1, "the close was reported \(observer.closings.count) times")
        _ = try? client.finish()
        _ = try? server.finish()
    }
}
