import CaptureStore
import Foundation
import NIOCore
import Synchronization

/// The sockets this tunnel carries, by their handshake's request id: where
/// a message someone asked to send (`ws_sends`) goes in. A session is here
/// from its `101` until both its sides have closed.
public final class WebSocketRegistry: Sendable {
    private let sessions = Mutex<[String: NIOLoopBound<WebSocketSession>]>([:])

    public init() {}

    func register(_ requestID: String, _ session: WebSocketSession, on eventLoop: EventLoop) {
        let bound = NIOLoopBound(session, eventLoop: eventLoop)
        sessions.withLock { $0[requestID] = bound }
    }

    func remove(_ requestID: String) {
        _ = sessions.withLock { $0.removeValue(forKey: requestID) }
    }

    public func carries(_ requestID: String) -> Bool { sessions.withLock { $0[requestID] != nil } }

    public var count: Int { sessions.withLock { $0.count } }

    /// Sends `payload` as one message `toClient` (else to the server);
    /// completes with its number on the socket, or fails saying why. Nil:
    /// this tunnel does not carry the socket.
    public func send(requestID: String, toClient: Bool, opcode: WebSocketMessageRecord.Opcode, payload: Data) -> EventLoopFuture<Int>? {
        guard let bound = sessions.withLock({ $0[requestID] }) else { return nil }
        let eventLoop = bound.eventLoop
        return eventLoop.flatSubmit {
            bound.value.inject(opcode, ByteBuffer(bytes: payload), toClient: toClient)
        }
    }
}

/// Why a message could not be sent into a socket.
public struct WebSocketSendRefused: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
