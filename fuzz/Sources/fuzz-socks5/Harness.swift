// SOCKS5 (RFC 1928) both ways. An input starting with 0x05 is what a
// client sends to the explicit proxy's port: it goes, in one read, a byte
// a read, and in reads of sizes drawn from the input, into an
// EmbeddedChannel carrying the tunnel's own front end
// (ProxyPipeline.startExplicitProxy: FrontEndSniffer, which hands a 0x05
// to SOCKS5Handshake and SOCKS5Message). The dial a CONNECT asks for goes to
// `FuzzConnector`, which opens it (an EmbeddedChannel for the server) or
// fails it with refused, unreachable, timed out or another error, at once
// or once the client's bytes are all in; then the client's input closes,
// or it falls silent past timeouts.request_head_seconds.
// Any other first byte picks the client side instead: the rest is an
// upstream SOCKS5 proxy's answers to SOCKS5ClientHandshake (credentials
// or not, and the target, from that byte).
//
// Properties (a failure aborts: a crash for libFuzzer), against models of
// the RFC written apart from the code (InboundModel, UpstreamModel):
// - never a trap, whatever the bytes and wherever the reads split them;
// - the proxy writes exactly the RFC's shapes: 05 00 or 05 FF to a
//   greeting, then one reply 05 REP 00 ATYP BND.ADDR BND.PORT, and nothing
//   before the handshake is over but that;
// - a refused greeting or request is answered with its reply code (07 a
//   command other than CONNECT, 08 an address type, 01 the rest) or closed
//   unanswered, is closed, dials nothing, and is recorded once, saying so;
//   a handshake left unfinished is closed, and recorded, when the client's
//   input ends or the head timeout passes;
// - a CONNECT dials exactly the address and port it encodes, once; a
//   failed dial is answered with the code its error earns (05 refused, 03
//   network, 04 host unreachable or timed out, 01 the rest) and recorded
//   with the target; an opened one with 00 and the bound address;
// - the client side sends its greeting, credentials and a CONNECT that the
//   inbound parser reads back as the target; it opens the tunnel exactly
//   when the proxy says 00, fails otherwise (and when the proxy closes
//   mid-handshake), and hands every byte after the reply on.
import FuzzSupport

/// Read sizes from 1 to 8, drawn from `seed`.
func sizes(_ count: Int, seed: UInt64) -> [Int] {
    var state = seed | 1
    var out: [Int] = []
    var total = 0
    while total < count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let size = 1 + Int((state >> 33) % 8)
        out.append(size)
        total += size
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let bytes = Array(input)
        guard let first = bytes.first else { return }
        let seed = bytes.reduce(UInt64(bytes.count)) { $0 &* 31 &+ UInt64($1) }
        let pick = Int(seed % 1_000_003)
        if first == 0x05 {
            InboundRun(input: bytes, sizes: [bytes.count], outcome: .pick(pick), ending: .inputClosed).run()
            InboundRun(input: bytes, sizes: Array(repeating: 1, count: bytes.count), outcome: .pick(pick + 1), ending: .silence).run()
            InboundRun(
                input: bytes, sizes: sizes(bytes.count, seed: seed), outcome: .pick(pick + 2),
                ending: pick % 2 == 0 ? .inputClosed : .silence
            ).run()
        } else {
            let target = UpstreamRun.targets[Int(first >> 1) % UpstreamRun.targets.count]
            let answers = Array(bytes.dropFirst())
            UpstreamRun(answers: answers, credentials: first & 1 == 1, target: target, sizes: [answers.count]).run()
            UpstreamRun(answers: answers, credentials: first & 1 == 1, target: target, sizes: sizes(answers.count, seed: seed)).run()
        }
    }
}
