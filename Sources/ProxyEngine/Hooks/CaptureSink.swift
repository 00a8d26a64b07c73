import CaptureStore
import NIOCore

/// Where the capture hook's rows go: the tunnel's capture writer, which
/// batches them into the store. The data path hands rows and body files
/// over, and asks whether the store keeps up (when it does not, new
/// requests wait: capture costs throughput, never exchanges).
public protocol CaptureSink: AnyObject, Sendable {
    /// `capture.body_max`: what is stored of one body.
    var bodyMax: Int { get }
    /// A file for a body that outgrew the row; nil (the body is then stored
    /// truncated) when there is nowhere to write it.
    func openBodyFile(requestID: String, _ direction: BodyStore.Direction, on eventLoop: EventLoop) -> BodyFileWriter?
    /// The row, committed once its body files are closed.
    func submit(_ record: ExchangeRecord, files: [BodyFileWriter])
    /// True while the store is behind but working.
    var isBehind: Bool { get }
    /// Runs `body` on `eventLoop` once the store is no longer behind.
    func whenCaughtUp(on eventLoop: EventLoop, _ body: @escaping @Sendable () -> Void)
    /// Exchanges begun and not yet submitted (nil: not followed).
    var open: OpenExchanges? { get }
}

extension CaptureSink {
    func submit(_ record: ExchangeRecord) { submit(record, files: []) }
    public var open: OpenExchanges? { nil }
}

/// Bodies up to this size are kept in the row.
public enum CaptureLimits {
    public static let inlineBodyLimit = 16 * 1024
}
