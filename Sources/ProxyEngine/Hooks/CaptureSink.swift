import CaptureStore
import Foundation
import NIOCore

/// Where everything the hooks record goes: the tunnel's capture writer,
/// which batches rows into the store. The data path hands rows and body
/// files over, pins and held messages too, and asks whether the store keeps
/// up (when it does not, new requests wait: capture costs throughput, never
/// exchanges). Every call is made on an event loop and returns at once: the
/// store is written off the loops (the writer's task, NIO's thread pool).
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
    /// A refusal pinned `host`: queued, committed with the next batch.
    func recordPin(_ host: String, reason: String)
    /// A held message's `breakpoint_events` row; completes on `eventLoop`
    /// with the row as stored (its id), or fails when it cannot be stored.
    func recordBreakpointPause(_ event: BreakpointEvent, on eventLoop: EventLoop) -> EventLoopFuture<BreakpointEvent>
    /// A held message's outcome (and the message as it went on), on its row.
    func recordBreakpointOutcome(id: Int64, _ outcome: BreakpointEvent.Outcome, final: Data?, on eventLoop: EventLoop) -> EventLoopFuture<
        Void
    >
    /// A WebSocket opened, sent messages or closed: committed after the
    /// rows submitted before it (its handshake's first).
    func submit(_ event: WebSocketEvent)
    /// The file for a socket's large message payloads (nil: nowhere to write).
    func openMessagesFile(requestID: String, on eventLoop: EventLoop) -> BodyFileWriter?
    /// The socket's row is gone (retention, "clear"): its messages are no longer stored.
    func isDropped(socket requestID: String) -> Bool
}

extension CaptureSink {
    func submit(_ record: ExchangeRecord) { submit(record, files: []) }
    /// A sink with no store keeps no sockets.
    public func submit(_ event: WebSocketEvent) {}
    public func openMessagesFile(requestID: String, on eventLoop: EventLoop) -> BodyFileWriter? { nil }
    public func isDropped(socket requestID: String) -> Bool { false }
    public var open: OpenExchanges? { nil }
    /// A sink with no store keeps no pins.
    public func recordPin(_ host: String, reason: String) {}
    /// A sink with no store keeps no held messages: they go on unheld.
    public func recordBreakpointPause(_ event: BreakpointEvent, on eventLoop: EventLoop) -> EventLoopFuture<BreakpointEvent> {
        eventLoop.makeFailedFuture(NoBreakpointStore())
    }

    public func recordBreakpointOutcome(id: Int64, _ outcome: BreakpointEvent.Outcome, final: Data?, on eventLoop: EventLoop)
        -> EventLoopFuture<Void>
    {
        eventLoop.makeFailedFuture(NoBreakpointStore())
    }
}
