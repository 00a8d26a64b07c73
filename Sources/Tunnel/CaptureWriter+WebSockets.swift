import CaptureStore
import Foundation
import NIOCore
import ProxyEngine

/// WebSockets in the capture writer: a socket's events queue behind the rows
/// submitted before them (`WebSocketEventQueue`), its large payloads go to a
/// file of its own, and sockets a stopped tunnel left open are closed at start.
extension CaptureWriter {
    public func submit(_ event: WebSocketEvent) {
        uncommitted.add(event.weight, ordering: .relaxed)
        let dropped = sockets.append(event)
        if dropped > 0 {
            uncommitted.subtract(dropped, ordering: .relaxed)
            wakeWaiters()
            logger.error("the capture store is falling behind; dropped the oldest WebSocket messages", metadata: ["DROPPED": "\(dropped)"])
        }
        wakeUp.yield()
    }

    public func isDropped(socket requestID: String) -> Bool { sockets.isDropped(requestID) }

    public func openMessagesFile(requestID: String, on eventLoop: EventLoop) -> BodyFileWriter? {
        BodyFileWriter(
            store: bodies, name: WebSocketRepository.fileName(requestID: requestID), direction: nil, backlog: fileBacklog, spares: nil,
            eventLoop: eventLoop)
    }

    /// Sockets a tunnel that is gone left open (a crash, a kill) are closed.
    func closeAbandonedSockets() async {
        do {
            // At start this tunnel carries no socket yet: one under its own pid (a
            // container's tunnel keeps its pid across restarts) was left by its predecessor.
            let own = Int(getpid())
            let closed = try await WebSocketRepository(database: store.database).closeAbandoned { pid in
                pid > 0 && pid != own && (kill(pid_t(pid), 0) == 0 || errno == EPERM)
            }
            if closed > 0 { logger.notice("closed WebSockets a stopped tunnel left open", metadata: ["SOCKETS": "\(closed)"]) }
        } catch {
            logger.error("cannot close the WebSockets a stopped tunnel left open", metadata: ["ERROR": "\(StoreHealth.describe(error))"])
        }
    }
}
