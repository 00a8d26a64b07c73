import BusymateShared
import CaptureStore
import Foundation
import Logging
import NIOCore
import NIOEmbedded
import NIOWebSocket
import Testing

@testable import ProxyEngine

/// A socket between two embedded channels, each with NIO's frame decoder
/// and encoder and a relay: frames cross byte for byte, the observer hears
/// each message and the close, and a broken frame ends both sides.
@Suite struct WebSocketSessionTests {
    final class Heard: WebSocketObserver {
        var fragments: [(fromClient: Bool, payload: String, last: Bool)] = []
        var controls: [WebSocketOpcode] = []
        var closings: [WebSocketClosing] = []
        func fragment(_ fragment: WebSocketFragment, fromClient: Bool) {
            fragments.append((fromClient, String(buffer: fragment.payload), fragment.last))
        }
        func control(_ opcode: WebSocketOpcode, fromClient: Bool) { controls.append(opcode) }
        var whole: [(payload: String, fromClient: Bool, origin: WebSocketMessageRecord.Origin)] = []
        func message(
            _ opcode: WebSocketMessageRecord.Opcode, _ payload: ByteBuffer, fromClient: Bool, origin: WebSocketMessageRecord.Origin
        ) -> Int? {
            whole.append((String(buffer: payload), fromClient, origin))
            return whole.count
        }
        func readComplete() {}
        func closed(_ closing: WebSocketClosing) { closings.append(closing) }
        var isBehind: Bool { false }
        func whenCaughtUp(_ body: @escaping @Sendable () -> Void) { body() }
    }

    struct Socket {
        let loop = EmbeddedEventLoop()
        let client: EmbeddedChannel
        let server: EmbeddedChannel
        let heard = Heard()

        let session: WebSocketSession

        init(deflate: Bool = false, breakpoints: (any BreakpointHolds)? = nil) throws {
            client = EmbeddedChannel(loop: loop)
            server = EmbeddedChannel(loop: loop)
            session = try WebSocketSession(
                handshake: WebSocketHandshake(extensions: nil, deflate: deflate), observer: heard,
                stats: TrafficStats(), logger: Logger(label: "test"), eventLoop: loop,
                requestID: "socket", breakpoints: breakpoints, url: "http://chat.example/ws")
            let relays = session.makeRelays()
            try client.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)), WebSocketFrameWriter(), relays.client,
            ])
            try server.pipeline.syncOperations.addHandlers([
                ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)), WebSocketFrameWriter(), relays.server,
            ])
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        }

        /// Everything a channel wrote, as one buffer.
        func written(by channel: EmbeddedChannel) throws -> [UInt8] {
            var all: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { all += buffer.readableBytesView }
            return all
        }
    }

    /// A frame as a peer writes it: masked with `key` when given.
    static func wire(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, key: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let mask: UInt8 = key == nil ? 0 : 0x80
        if payload.count < 126 {
            out.append(mask | UInt8(payload.count))
        } else {
            out.append(mask | 126)
            out += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        guard let key else { return out + payload }
        return out + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    @Test func framesCrossByteForByteAndTheObserverReadsThemUnmasked() throws {
        let s = try Socket()
        let up = Self.wire(0x1, Array("hello".utf8), key: [1, 2, 3, 4])
        try s.client.writeInbound(ByteBuffer(bytes: up))
        #expect(try s.written(by: s.server) == up, "the client's frame, its masking key kept")
        let long = [UInt8](repeating: 7, count: 300)
        let down = Self.wire(0x2, long, fin: false) + Self.wire(0x0, [8, 9])
        try s.server.writeInbound(ByteBuffer(bytes: down))
        #expect(try s.written(by: s.client) == down, "the server's fragments as sent")
        #expect(s.heard.fragments.map(\.payload) == ["hello", String(decoding: long, as: UTF8.self), "\u{8}\t"])
        #expect(s.heard.fragments.map(\.fromClient) == [true, false, false] && s.heard.fragments.map(\.last) == [true, false, true])
    }

    @Test func theFirstCloseFrameSaysWhoClosedAndTheEndComesWhenBothSidesHaveGone() throws {
        let s = try Socket()
        try s.server.writeInbound(ByteBuffer(bytes: Self.wire(0x8, [0x0F, 0xA1] + Array("done".utf8))))
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x8, [0x03, 0xE8], key: [9, 9, 9, 9])))
        #expect(s.heard.closings.isEmpty)
        try s.server.close().wait()
        // The server's close reaches the client: it is closed once its writes have gone.
        s.loop.run()
        #expect(!s.client.isActive)
        #expect(s.heard.closings.count == 1)
        let closing = s.heard.closings.first
        #expect(closing?.closedBy == "server" && closing?.closeCode == 4001 && closing?.closeReason == "done" && closing?.error == nil)
    }

    @Test func anUnmaskedClientFrameEndsTheSocketWithACloseToEachSide() throws {
        let s = try Socket()
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x1, Array("no mask".utf8))))
        s.loop.run()
        let toClient = try s.written(by: s.client)
        let toServer = try s.written(by: s.server)
        #expect(toClient.first == 0x88 && toClient.count > 4 && Array(toClient[2...3]) == [0x03, 0xEA], "1002 to the client, unmasked")
        #expect(toServer.first == 0x88 && toServer[1] & 0x80 != 0, "a masked close to the server: \(toServer)")
        #expect(!s.client.isActive && !s.server.isActive)
        #expect(s.heard.closings.first?.closedBy == "proxy" && s.heard.closings.first?.closeCode == 1002)
        #expect(s.heard.closings.first?.error?.contains("unmasked") == true)
        #expect(s.heard.fragments.isEmpty, "nothing of the bad frame was passed on")
    }

    @Test func pingsAndPongsAreCountedAndPassedOn() throws {
        let s = try Socket()
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x9, [1], key: [0, 0, 0, 1])))
        try s.server.writeInbound(ByteBuffer(bytes: Self.wire(0xA, [1])))
        #expect(try s.written(by: s.server).count == 7 && s.written(by: s.client).count == 3)
        try s.client.close().wait()
        s.loop.run()
        #expect(s.heard.closings.first?.pings == 1 && s.heard.closings.first?.pongs == 1 && s.heard.closings.first?.closedBy == nil)
        #expect(s.heard.controls == [.ping, .pong])
    }

    @Test func aMessageOfTheProxysOwnWaitsForTheOneUnderWayInItsDirection() throws {
        let s = try Socket()
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x1, Array("part ".utf8), fin: false, key: [1, 1, 1, 1])))
        _ = try s.written(by: s.server)
        let sent = s.session.inject(.text, ByteBuffer(string: "mine"), toClient: false)
        #expect(try s.written(by: s.server).isEmpty, "not inside the client's fragmented message")
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x0, Array("end".utf8), key: [1, 1, 1, 1])))
        let out = try s.written(by: s.server)
        // The continuation first, then the proxy's own: masked, as a client's frames are.
        #expect(out.count == 2 + 4 + 3 + 2 + 4 + 4 && out[9] == 0x81 && out[10] & 0x80 != 0)
        #expect(try sent.wait() == 1 && s.heard.whole.map(\.payload) == ["mine"] && s.heard.whole.first?.origin == .injected)
        // A side that sent its close takes no more in its name.
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x8, [0x03, 0xE8], key: [2, 2, 2, 2])))
        #expect(throws: WebSocketSendRefused.self) { try s.session.inject(.text, ByteBuffer(string: "late"), toClient: false).wait() }
    }

    /// Holds every client message, until the test resolves it.
    final class HoldAll: BreakpointHolds, @unchecked Sendable {
        var paused: [(payload: Data, promise: EventLoopPromise<MessageResolution>)] = []
        var isEmpty: Bool { false }
        var usesFilters: Bool { false }
        func holds(_ kind: BreakpointEvent.Kind, _ url: String, exchange: FilterSubject?) -> Bool { kind == .messageFromClient }
        func pause(
            _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, requestID: String, method: String, url: String,
            on eventLoop: EventLoop
        ) -> EventLoopFuture<BreakpointResolution> { eventLoop.makeSucceededFuture(.dropped) }
        func clientLeft(requestID: String) {}
        var closedWhileHeld = 0
        func messageSocketClosed(requestID: String) {
            closedWhileHeld += 1
            for (_, promise) in paused { promise.succeed(.gone) }
        }
        func pauseMessage(
            _ payload: Data, text: Bool, editable: Bool, fromClient: Bool, requestID: String, url: String,
            on eventLoop: EventLoop
        ) -> EventLoopFuture<MessageResolution> {
            let promise = eventLoop.makePromise(of: MessageResolution.self)
            paused.append((payload, promise))
            return promise.futureResult
        }
    }

    @Test func aHeldMessageWaitsWithWhatFollowsItAndTheOtherWayFlows() throws {
        let holds = HoldAll()
        let s = try Socket(breakpoints: holds)
        let first = Self.wire(0x1, Array("held".utf8), key: [3, 3, 3, 3]), second = Self.wire(0x1, Array("after".utf8), key: [4, 4, 4, 4])
        try s.client.writeInbound(ByteBuffer(bytes: first + second))
        #expect(try s.written(by: s.server).isEmpty && holds.paused.map(\.payload) == [Data("held".utf8)])
        let down = Self.wire(0x1, Array("meanwhile".utf8))
        try s.server.writeInbound(ByteBuffer(bytes: down))
        #expect(try s.written(by: s.client) == down, "the server's way flows")
        // Continued: it goes as it came, then what followed it is held in its turn.
        holds.paused[0].promise.succeed(.forward)
        #expect(try s.written(by: s.server) == first && holds.paused.count == 2)
        holds.paused[1].promise.succeed(.edited(Data("AFTER!".utf8)))
        let edited = try s.written(by: s.server)
        #expect(edited.count == 2 + 4 + 6 && edited[0] == 0x81, "the edit, as one masked frame")
        #expect(s.heard.whole.map(\.payload) == ["AFTER!"] && s.heard.whole.first?.origin == .edited)
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x2, [9, 9], key: [5, 5, 5, 5])))
        holds.paused[2].promise.succeed(.drop)
        #expect(try s.written(by: s.server).isEmpty && s.heard.whole.last?.origin == .dropped)
    }

    /// The held side leaves (its close frame, then its connection): the other
    /// side gets the message and the close once it is resolved, then closes.
    @Test func aSideThatLeavesWhileItsMessageIsHeldIsFollowedAfterTheResolution() throws {
        let holds = HoldAll()
        let s = try Socket(breakpoints: holds)
        let held = Self.wire(0x1, Array("bye".utf8), key: [6, 6, 6, 6]), close = Self.wire(0x8, [0x0F, 0xA2], key: [7, 7, 7, 7])
        try s.client.writeInbound(ByteBuffer(bytes: held + close))
        #expect(throws: WebSocketSendRefused.self, "no sending into a held direction") {
            try s.session.inject(.text, ByteBuffer(string: "mine"), toClient: false).wait()
        }
        try s.client.close().wait()
        s.loop.run()
        let nothing = try s.written(by: s.server)
        #expect(s.server.isActive && nothing.isEmpty, "the server waits for the resolution")
        holds.paused[0].promise.succeed(.forward)
        s.loop.run()
        #expect(try s.written(by: s.server) == held + close && !s.server.isActive)
        #expect(s.heard.closings.count == 1 && holds.closedWhileHeld == 0)
    }

    @Test func aSocketThatClosesWhileAMessageIsHeldResolvesItAsGone() throws {
        let holds = HoldAll()
        let s = try Socket(breakpoints: holds)
        try s.client.writeInbound(ByteBuffer(bytes: Self.wire(0x1, Array("never".utf8), key: [8, 8, 8, 8])))
        // The server goes: the client is closed after it (the client's own message waits in vain).
        try s.server.close().wait()
        s.loop.run()
        #expect(!s.client.isActive)
        #expect(holds.closedWhileHeld == 1 && s.heard.closings.count == 1 && s.heard.whole.isEmpty)
    }
}
