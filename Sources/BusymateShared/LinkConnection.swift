import Foundation

/// One peer on `control.sock` with a reader thread: messages (and the
/// descriptors that came with them) as an async sequence that ends at EOF.
public final class LinkConnection: Sendable {
    public let socket: UnixSocket

    public init(socket: UnixSocket) { self.socket = socket }

    public struct Incoming: Sendable {
        public var message: ControlMessage
        public var descriptors: [Int32]
    }

    public func send(_ message: ControlMessage, descriptors: [Int32] = []) throws {
        try socket.send(message, descriptors: descriptors)
    }

    public func messages(name: String) -> AsyncStream<Incoming> {
        let (stream, continuation) = AsyncStream.makeStream(of: Incoming.self)
        let socket = self.socket
        let thread = Thread {
            while true {
                do {
                    guard let (message, fds) = try socket.receive() else { break }
                    continuation.yield(Incoming(message: message, descriptors: fds))
                } catch {
                    break
                }
            }
            continuation.finish()
        }
        thread.name = name
        thread.start()
        return stream
    }

    public func close() {
        socket.shutdown()
    }
}
