import NIOCore
import NIOHTTP1

/// The counters as a hook: requests begun, and body bytes from and to clients.
struct CounterHook: ExchangeHook {
    let stats: TrafficStats

    var wantsBodies: Bool { true }

    func requestHead(_ head: inout HTTPRequestHead, _ flow: inout ExchangeFlow) { stats.requestStarted() }

    func requestBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {
        // A held part is counted as it is read, not again as it goes on.
        if fate == .forwarded || fate == .held { stats.received(fromClient: part.readableBytes) }
    }

    func responseBody(_ part: ByteBuffer, _ fate: BodyPartFate, _ flow: inout ExchangeFlow) {
        if fate == .forwarded { stats.sent(toClient: part.readableBytes) }
    }
}
