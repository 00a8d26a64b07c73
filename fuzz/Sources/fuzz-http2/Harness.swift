// The client-facing HTTP/2 layer: an h2c client of the explicit proxy.
// Each input is what follows the client connection preface ("PRI *
// HTTP/2.0…", which the harness sends first): HTTP/2 frames, read by an
// EmbeddedChannel carrying the tunnel's own front end
// (ProxyPipeline.startExplicitProxy: FrontEndSniffer, which sees the
// preface and puts ProxyPipeline.installHTTP2 in the HTTP/1 layer's stead:
// NIO's HTTP/2 handler with HTTP2Limits, the connection manager, and per
// stream HTTP2FramePayloadToHTTP1ServerCodec and HTTPExchangeHandler).
// It goes in one read, and in reads of sizes drawn from the input. Dials
// go to `StandInConnector`, which opens each at once onto an
// EmbeddedChannel origin that answers a small HTTP/1 response.
//
// Properties (a failure aborts: a crash for libFuzzer):
// - never a trap, whatever the frames and wherever the reads split them;
// - the proxy answers in HTTP/2 only: its bytes start with its SETTINGS
//   frame and are whole frames;
// - what it writes is bounded by what it was sent (no amplification: a few
//   kilobytes a client frame), and it dials at most once per HEADERS frame
//   the client sent (Rapid Reset cannot make a dial storm);
// - a GOAWAY with an error code is followed by the connection closing;
// - once the client's connection closes, no origin connection is left open.
import FuzzSupport

/// Read sizes from 1 to 64, drawn from `seed`.
func sizes(_ count: Int, seed: UInt64) -> [Int] {
    var state = seed | 1
    var out: [Int] = []
    var total = 0
    while total < count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        let size = 1 + Int((state >> 33) % 64)
        out.append(size)
        total += size
    }
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    Fuzz.input(data, size) { input in
        let frames = Array(input)
        let bytes = H2CRun.preface + frames
        let seed = frames.reduce(UInt64(frames.count)) { $0 &* 31 &+ UInt64($1) }
        H2CRun(input: bytes, sizes: [bytes.count]).run()
        H2CRun(input: bytes, sizes: sizes(bytes.count, seed: seed)).run()
    }
}
