import CLinux
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Watches one directory with inotify and reports the names of files that
/// were saved there: a write closed (`IN_CLOSE_WRITE`, an in-place save),
/// a file moved in (`IN_MOVED_TO`: `mv`, `sed -i`, an editor's
/// write-and-rename) or a socket created (`IN_CREATE`); and for the names
/// in `removals`, a file deleted or moved away (`IN_DELETE`,
/// `IN_MOVED_FROM`: a CA removed while running). Not for settings.json, which
/// an editor's save moves away for a moment.
public final class FileWatcher: Sendable {
    public let directory: String
    private let inotify: Int32
    private let stopPipe: (read: Int32, write: Int32)
    private let removals: Set<String>
    /// Once `changes()` has started its thread, the thread owns the inotify
    /// descriptor and the pipe's read end, and closes them as it ends: they
    /// are never closed under a thread still polling them.
    private let reading = Atomic<Bool>(false)

    public init(directory: URL, removals: Set<String> = []) throws {
        self.directory = directory.path
        self.removals = removals
        inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard inotify >= 0 else { throw SystemError("inotify_init1") }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
        guard inotify_add_watch(inotify, directory.path, mask) >= 0 else {
            let e = SystemError("inotify_add_watch \(directory.path)")
            close(inotify)
            throw e
        }
        var fds: [Int32] = [0, 0]
        guard busymate_pipe_cloexec(&fds) == 0 else { throw SystemError("pipe2") }
        stopPipe = (fds[0], fds[1])
    }

    deinit {
        // With the write end closed, a reading thread wakes (POLLHUP) and ends.
        close(stopPipe.write)
        if !reading.load(ordering: .acquiring) {
            close(inotify)
            close(stopPipe.read)
        }
    }

    public func stop() {
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
    }

    /// File names as they change. Bursts are delivered as they come; readers
    /// must reload idempotently (DESIGN: inotify and a notification may both
    /// arrive for one change).
    /// Once per watcher: a second call gets a stream that has ended.
    public func changes() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(1024))
        guard reading.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            continuation.finish()
            return stream
        }
        let fd = inotify
        let stop = stopPipe.read
        let removals = removals
        let removalMask = UInt32(IN_DELETE | IN_MOVED_FROM)
        let thread = Thread {
            let size = 64 * 1024
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<inotify_event>.alignment)
            defer { buffer.deallocate() }
            var pollSet = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            loop: while true {
                let ready = poll(&pollSet, 2, -1)
                if ready < 0 && errno == EINTR { continue }
                if ready < 0 || pollSet[1].revents != 0 { break }
                let n = read(fd, buffer, size)
                if n <= 0 { continue }
                var offset = 0
                while offset + MemoryLayout<inotify_event>.size <= n {
                    let event = buffer.advanced(by: offset).assumingMemoryBound(to: inotify_event.self).pointee
                    if event.mask & UInt32(IN_IGNORED) != 0 { break loop }
                    if event.len > 0 {
                        let namePtr = buffer.advanced(by: offset + MemoryLayout<inotify_event>.size).assumingMemoryBound(to: CChar.self)
                        let name = String(cString: namePtr)
                        // Temporary files of atomic writers are not the file.
                        let removed = event.mask & removalMask != 0
                        if !name.hasPrefix("."), !removed || removals.contains(name) { continuation.yield(name) }
                    }
                    offset += MemoryLayout<inotify_event>.size + Int(event.len)
                }
            }
            close(fd)
            close(stop)
            continuation.finish()
        }
        thread.name = "busymate-inotify"
        thread.start()
        return stream
    }
}
