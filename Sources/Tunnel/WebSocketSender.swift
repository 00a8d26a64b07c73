import CaptureStore
import Foundation
import Logging
import NIOPosix
import ProxyEngine

/// Carries out `ws_sends` (`busymate ws send`, the page's composer) for the
/// sockets this tunnel carries: each claimed once, sent after the message
/// under way in its direction, and its row says how it went. Run after
/// `webSocketSend` and on the status tick (a post may be lost). The store
/// is read and written on NIO's thread pool, never on a loop.
struct WebSocketSender: Sendable {
    let store: StoreHandle
    let registry: WebSocketRegistry
    private let logger = Logger(label: "busymate.capture")

    init(store: StoreHandle, registry: WebSocketRegistry) {
        self.store = store
        self.registry = registry
    }

    func carryOut() async {
        guard registry.count > 0 else { return }
        let sends = WebSocketSendRepository(database: store.database)
        let pool = NIOThreadPool.singleton
        guard let pending = try? await pool.runIfActive({ try sends.pending() }) else { return }
        let pid = Int(getpid())
        for send in pending where registry.carries(send.requestID) {
            guard (try? await pool.runIfActive({ try sends.claim(send.id, pid: pid) })) == true else { continue }
            guard let sent = registry.send(requestID: send.requestID, toClient: send.toClient, opcode: send.opcode, payload: send.payload)
            else {
                _ = try? await pool.runIfActive { try sends.fail(send.id, "the socket closed") }
                continue
            }
            // Its outcome is recorded when it comes (a message may wait behind
            // one under way): the notification and tick jobs do not wait for it.
            let logger = logger
            sent.whenComplete { result in
                pool.submit { _ in
                    switch result {
                    case let .success(seq):
                        // Sent: a failed write of the outcome must not tell the user it was not.
                        do {
                            try sends.sent(send.id, seq: seq)
                        } catch {
                            logger.error("sent a message into a WebSocket but cannot record it", metadata: ["ERROR": "\(error)"])
                        }
                        logger.info(
                            "sent a message into a WebSocket",
                            metadata: [
                                "REQUEST_ID": "\(send.requestID)", "SEQ": "\(seq)",
                                "TO": "\(send.toClient ? "client" : "server")",
                            ])
                    case let .failure(error):
                        _ = try? sends.fail(send.id, (error as? WebSocketSendRefused)?.description ?? "\(error)")
                    }
                }
            }
        }
    }
}
