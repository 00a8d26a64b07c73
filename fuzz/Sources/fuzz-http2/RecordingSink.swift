import CaptureStore
import NIOCore
import ProxyEngine

/// Counts the rows the streams write (no store, no body files).
final class RecordingSink: CaptureSink, @unchecked Sendable {
    // @unchecked: used on the one EmbeddedEventLoop of one run.
    var rows = 0
    let bodyMax = 1 << 16
    let isBehind = false
    func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter? { nil }
    func submit(_ record: ExchangeRecord, files: [BodyFileWriter]) { rows += 1 }
    func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void) { body() }
}
