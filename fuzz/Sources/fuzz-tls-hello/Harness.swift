// The ClientHello / ServerHello peek (TLSHello.parse and TLSHelloSniffer):
// the first bytes of a passed-through tunnel, each way, read for the SNI,
// the version and the cipher suite, without holding anything back.
//
// Properties:
// - the sniffer passes every byte on, unchanged and in order, whatever
//   the hello holds and however the bytes are split into reads;
// - what the sniffer reports, read by read, is what TLSHello.parse says
//   of the whole input (a hello parsed from a prefix is the same hello);
// - a ClientHello's SNI is lowercase; a ServerHello has a version and a
//   cipher and no SNI.
import FuzzSupport
import NIOCore
import NIOEmbedded

@testable import ProxyEngine

/// Collects what the sniffer passes on.
final class Collector: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    var bytes = ByteBuffer()
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        bytes.writeBuffer(&buffer)
    }
}

final class Found: @unchecked Sendable {
    var hellos: [TLSHello] = []
}

func sniff(_ side: TLSHelloSniffer.Side, _ input: UnsafeRawBufferPointer, chunk: Int) {
    let found = Found()
    let collector = Collector()
    let channel = EmbeddedChannel()
    do {
        try channel.pipeline.syncOperations.addHandler(TLSHelloSniffer(side) { found.hellos.append($0) })
        try channel.pipeline.syncOperations.addHandler(collector)
    } catch {
        fatalError("cannot set up the pipeline: \(error)")
    }
    var offset = 0
    while offset < input.count {
        let end = min(input.count, offset + chunk)
        _ = try? channel.writeInbound(ByteBuffer(bytes: UnsafeRawBufferPointer(rebasing: input[offset..<end])))
        offset = end
    }
    _ = try? channel.finish(acceptAlreadyClosed: true)
    Fuzz.check(
        collector.bytes.readableBytesView.elementsEqual(input),
        "the sniffer did not pass every byte on (\(collector.bytes.readableBytes) of \(input.count))")
    Fuzz.check(found.hellos.count <= 1, "the sniffer reported \(found.hellos.count) hellos")
    let whole = TLSHello.parse(ByteBuffer(bytes: input), expecting: side == .client ? 1 : 2)
    if let hello = found.hellos.first {
        Fuzz.check(whole == .found(hello), "the sniffer found \(hello) read by read, parse of the whole says \(whole)")
    } else if input.count < TLSHelloSniffer.limit, case let .found(hello) = whole {
        Fuzz.check(false, "parse of the whole finds \(hello), the sniffer found nothing")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let buffer = ByteBuffer(bytes: input)
        for (type, side) in [(UInt8(1), TLSHelloSniffer.Side.client), (2, .server)] {
            guard case let .found(hello) = TLSHello.parse(buffer, expecting: type) else { continue }
            if side == .client {
                Fuzz.check(hello.version == nil && hello.cipher == nil, "a ClientHello with server choices: \(hello)")
                if let sni = hello.sni { Fuzz.check(sni == sni.lowercased(), "SNI \(Fuzz.show(sni)) is not lowercase") }
            } else {
                Fuzz.check(
                    hello.sni == nil && hello.version != nil && hello.cipher != nil, "a ServerHello without version or cipher: \(hello)")
            }
        }
        // One read, and small reads (records split as TCP may split them).
        let small = 1 + input.count % 13
        sniff(.client, input, chunk: max(1, input.count))
        sniff(.client, input, chunk: small)
        sniff(.server, input, chunk: small)
    }
}
