import BusymateShared
import CaptureStore
import NIOCore

extension ExchangeHooks {
    /// Hands a held message to the hook that holds it; nil when none does
    /// (capture off: nobody could resolve it, so it goes on).
    func pause(
        _ message: RawHTTPMessage, bodyless: Bool = false, kind: BreakpointEvent.Kind,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution>? {
        for hook in hookList.steering {
            if let resolution = hook.pause(message, bodyless: bodyless, kind: kind, flow, on: eventLoop) { return resolution }
        }
        return nil
    }

    /// The client left while a message was held: it goes nowhere.
    func clientLeftWhileHeld() {
        for hook in hookList.all { hook.clientLeftWhileHeld(flow) }
    }
}
