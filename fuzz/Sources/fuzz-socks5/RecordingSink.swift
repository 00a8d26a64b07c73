import CaptureStore
import NIOCore
import ProxyEngine

/// The rows the SOCKS5 front end writes (a refusal's, with its words).
final class RecordingSink: CaptureSink, @unchecked Sendable {
    // @unchecked: used on the one EmbeddedEventLoop of one run.
    var rows: [ExchangeRecord] = []
    let bodyMax = 1 << 16
    let isBehind = false
    func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter? { nil }
    func submit(_ record: ExchangeRecord, files: [BodyFileWriter]) { rows.append(record) }
    func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void) { body() }
}
