import BusymateShared
import CaptureStore
import Foundation
import NIOCore

/// What the exchange's hooks ask of the breakpoints: whether a message is
/// held, and its resolution when it is. `BreakpointController` answers from
/// `settings.json` and the store; a handler test stands in to release a
/// held request when it chooses.
protocol BreakpointHolds: Sendable {
    /// No patterns: nothing is held, and nothing more is asked.
    var isEmpty: Bool { get }
    /// Some pattern is a filter: the hooks describe the exchange for it.
    var usesFilters: Bool { get }
    /// `exchange`: the exchange as a filter reads it, when `usesFilters`.
    func holds(_ kind: BreakpointEvent.Kind, _ url: String, exchange: FilterSubject?) -> Bool
    /// Completes on `eventLoop` once the held message is resolved.
    func pause(
        _ message: RawHTTPMessage, bodyless: Bool, kind: BreakpointEvent.Kind, requestID: String, method: String, url: String,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<BreakpointResolution>
    /// The client left while `requestID`'s message was held.
    func clientLeft(requestID: String)
    /// Holds a WebSocket message (BreakpointController+Messages.swift).
    func pauseMessage(
        _ payload: Data, text: Bool, editable: Bool, fromClient: Bool, requestID: String, url: String,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<MessageResolution>
    /// The socket closed while a message of it was held.
    func messageSocketClosed(requestID: String)
}

extension BreakpointHolds {
    /// A stand-in that holds no messages sends them on.
    func pauseMessage(
        _ payload: Data, text: Bool, editable: Bool, fromClient: Bool, requestID: String, url: String,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<MessageResolution> {
        eventLoop.makeSucceededFuture(.forward)
    }

    func messageSocketClosed(requestID: String) {}
}

extension BreakpointController: BreakpointHolds {}
