import NIOCore
import NIOEmbedded
import Testing

@testable import ProxyEngine

/// Two channels glued byte for byte: bytes cross, a side that cannot take
/// more stops the other's reads, and a half-close crosses both ways.
@Suite struct GlueHandlerTests {
    struct Glued {
        let loop = EmbeddedEventLoop()
        let client: EmbeddedChannel
        let server: EmbeddedChannel
        let clientSide = CloseRecorder()
        let serverSide = CloseRecorder()

        init() throws {
            client = EmbeddedChannel(loop: loop)
            server = EmbeddedChannel(loop: loop)
            let (first, second) = GlueHandler.matchedPair()
            try client.pipeline.syncOperations.addHandlers([clientSide, first])
            try server.pipeline.syncOperations.addHandlers([serverSide, second])
            try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
            try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        }
    }

    /// Bytes either way restart the idle clock; silence both ways for the
    /// limit closes both sides, once.
    @Test func anIdlePairClosesBothSidesOnce() throws {
        let loop = EmbeddedEventLoop()
        let client = EmbeddedChannel(loop: loop), server = EmbeddedChannel(loop: loop)
        let clientSide = CloseRecorder(), serverSide = CloseRecorder()
        let closures = Counter()
        let (first, second) = GlueHandler.matchedPair(idle: .init(after: .seconds(10)) { closures.value += 1 })
        try client.pipeline.syncOperations.addHandlers([clientSide, first])
        try server.pipeline.syncOperations.addHandlers([serverSide, second])
        try client.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try server.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 2)).wait()
        loop.advanceTime(by: .seconds(6))
        try server.writeInbound(ByteBuffer(string: "down"))
        loop.advanceTime(by: .seconds(6))
        try client.writeInbound(ByteBuffer(string: "up"))
        loop.advanceTime(by: .seconds(9))
        #expect(closures.value == 0 && clientSide.modes.isEmpty && serverSide.modes.isEmpty, "closed while bytes flowed")
        loop.advanceTime(by: .seconds(2))
        #expect(closures.value == 1)
        #expect(clientSide.modes.contains(.all) && serverSide.modes.contains(.all))
        loop.advanceTime(by: .seconds(30))
        #expect(closures.value == 1)
    }

    final class Counter { var value = 0 }

    @Test func bytesCrossBothWays() throws {
        let g = try Glued()
        try g.client.writeInbound(ByteBuffer(string: "up"))
        #expect(try g.server.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "up"))
        try g.server.writeInbound(ByteBuffer(string: "down"))
        #expect(try g.client.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "down"))
    }

    @Test func aSideThatCannotTakeMoreStopsTheOthersReadsUntilItCan() throws {
        let g = try Glued()
        g.server.isWritable = false
        g.server.pipeline.fireChannelWritabilityChanged()
        let before = g.clientSide.reads
        g.client.read()
        #expect(g.clientSide.reads == before, "the client was read while the server could take nothing")
        g.server.isWritable = true
        g.server.pipeline.fireChannelWritabilityChanged()
        #expect(g.clientSide.reads == before + 1, "the withheld read was not issued once the server could take more")
        // And the other way.
        g.client.isWritable = false
        g.client.pipeline.fireChannelWritabilityChanged()
        let serverReads = g.serverSide.reads
        g.server.read()
        #expect(g.serverSide.reads == serverReads)
        g.client.isWritable = true
        g.client.pipeline.fireChannelWritabilityChanged()
        #expect(g.serverSide.reads == serverReads + 1)
    }

    @Test func aHalfCloseCrossesEachWayAfterTheBytesBeforeIt() throws {
        let g = try Glued()
        try g.client.writeInbound(ByteBuffer(string: "last"))
        g.client.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(try g.server.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "last"))
        #expect(g.serverSide.modes == [.output])
        #expect(g.client.isActive && g.server.isActive)
        // The server still answers, then half-closes its side in turn.
        try g.server.writeInbound(ByteBuffer(string: "answer"))
        #expect(try g.client.readOutbound(as: ByteBuffer.self) == ByteBuffer(string: "answer"))
        g.server.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(g.clientSide.modes == [.output])
    }

    @Test func aSideThatClosesClosesTheOther() throws {
        let g = try Glued()
        try g.server.close().wait()
        #expect(g.clientSide.modes.contains(.all))
        #expect(!g.client.isActive)
    }
}
