import CLinux
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Darwin notifications' stand-in: each process binds
/// `notify/<role>-<pid>.sock` and a post is one datagram to every other
/// socket there. A peer that is gone has its file removed.
///
/// Posting only queues: listing notify/ and sending are done on a serial
/// queue of the notifier's own, so a post from an event loop (a breakpoint's
/// hold) never waits on the file system, and posts go out in the order they
/// were made. `close()` sends what is queued first.
public final class Notifier: Sendable {
    public let sender: String
    public let socketPath: String
    private let directory: String
    private let socket: UnixSocket
    private let logger = Logger(label: "busymate.ipc")
    private let throttle: Mutex<[NotificationName: ThrottleState]> = Mutex([:])
    private let stopPipe: (read: Int32, write: Int32)
    /// Where posts are delivered, one after another.
    private let deliveries = DispatchQueue(label: "busymate-notify-post")
    /// Tests: runs on the delivery queue just before notify/ is listed.
    let beforeListing = Mutex<(@Sendable () -> Void)?>(nil)
    /// newTrafficCaptured is posted at most once per this interval.
    public static let trafficInterval: Double = 0.5

    private struct ThrottleState {
        var lastPost: Double = 0
        var pending = false
    }

    public init(paths: GroupPaths, role: String, pid: Int32 = getpid()) throws {
        sender = "\(role)-\(pid)"
        directory = paths.notifyDirectory.path
        socketPath = paths.notifySocket(role: role, pid: pid).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        socket = try UnixSocket.bind(path: socketPath, type: Int32(SOCK_DGRAM.rawValue), mode: 0o660)
        var fds: [Int32] = [0, 0]
        guard busymate_pipe_cloexec(&fds) == 0 else { throw SystemError("pipe2") }
        stopPipe = (fds[0], fds[1])
    }

    deinit {
        Glibc.close(stopPipe.read)
        Glibc.close(stopPipe.write)
    }

    /// Waits until every post made so far has been delivered (not those a
    /// throttle holds back). Blocks: not on an event loop.
    public func flush() {
        deliveries.sync {}
    }

    /// Sends what is queued, stops `notifications()` and removes this
    /// process's socket file.
    public func close() {
        flush()
        // Unlink before waking the reader: its consumer may exit at once.
        unlink(socketPath)
        var byte: UInt8 = 1
        _ = Glibc.write(stopPipe.write, &byte, 1)
    }

    /// Posts `name` to every other process now, or, for throttled names,
    /// at the end of the current interval. Never blocks: delivery is queued.
    public func post(_ name: NotificationName, payload: String? = nil) {
        let notification = BusymateNotification(name: name, sender: sender, payload: payload)
        guard name == .newTrafficCaptured else {
            deliveries.async { self.deliver(notification) }
            return
        }
        let now = Self.monotonicSeconds()
        let delay: Double? = throttle.withLock { table in
            var state = table[name, default: ThrottleState()]
            defer { table[name] = state }
            if state.pending { return nil }
            let wait = state.lastPost + Self.trafficInterval - now
            if wait <= 0 {
                state.lastPost = now
                return 0
            }
            state.pending = true
            return wait
        }
        guard let delay else { return }
        if delay == 0 {
            deliveries.async { self.deliver(notification) }
            return
        }
        deliveries.asyncAfter(deadline: .now() + delay) { [self] in
            throttle.withLock { table in
                table[name] = ThrottleState(lastPost: Self.monotonicSeconds(), pending: false)
            }
            deliver(notification)
        }
    }

    private func deliver(_ notification: BusymateNotification) {
        let bytes = notification.encoded()
        let own = (socketPath as NSString).lastPathComponent
        beforeListing.withLock { $0 }?()
        let peers = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for peer in peers where peer.hasSuffix(".sock") && peer != own {
            let path = "\(directory)/\(peer)"
            let file: UnixSocket.SocketFile
            do {
                file = try UnixSocket.SocketFile(path)
            } catch {
                // A link or a stranger's socket planted in notify/: never posted to (root posts here too).
                if let failure = error as? SystemError, failure.errno != ENOENT {
                    logger.notice(
                        "not posting to a file in notify/ that is not a peer's socket",
                        metadata: ["PEER": "\(peer)", "ERROR": "\(failure)"])
                }
                continue
            }
            defer { file.close() }
            guard let (addr, len) = try? UnixSocket.address(file.address) else { continue }
            var a = addr
            let rc = bytes.withUnsafeBytes { raw in
                withUnsafePointer(to: &a) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(socket.fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL), $0, len)
                    }
                }
            }
            if rc >= 0 { continue }
            switch errno {
            case ECONNREFUSED, ENOENT, ENOTSOCK:
                // Nobody is bound there any more: the peer is gone.
                if unlink(path) == 0 {
                    logger.debug("removed the socket of a gone peer", metadata: ["PEER": "\(peer)"])
                }
            case EAGAIN:
                logger.debug(
                    "peer's queue is full; notification dropped", metadata: ["PEER": "\(peer)", "NAME": "\(notification.name.rawValue)"])
            default:
                logger.debug("cannot post", metadata: ["PEER": "\(peer)", "ERRNO": "\(String(cString: strerror(errno)))"])
            }
        }
    }

    /// Notifications from other processes, as they arrive. One consumer.
    public func notifications() -> AsyncStream<BusymateNotification> {
        let (stream, continuation) = AsyncStream.makeStream(of: BusymateNotification.self, bufferingPolicy: .bufferingNewest(256))
        let fd = socket.fd
        let stop = stopPipe.read
        let logger = self.logger
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: BusymateNotification.maxSize + 1)
            var pollSet = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            while true {
                let ready = poll(&pollSet, 2, -1)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 || pollSet[1].revents != 0 { break }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n < 0 { continue }
                do {
                    continuation.yield(try BusymateNotification.decode(buffer[0..<n]))
                } catch {
                    logger.notice("ignored a malformed notification", metadata: ["ERROR": "\(error)"])
                }
            }
            continuation.finish()
        }
        thread.name = "busymate-notify"
        thread.start()
        return stream
    }

    static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
