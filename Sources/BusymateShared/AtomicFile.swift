import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Write to a temporary file in the same directory, fsync, rename: a reader
/// sees the old file or the new one, never half of one.
public enum AtomicFile {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The fallback when no new file fits (a full disk): the existing file,
    /// written over from its start and cut to length. A reader may see it
    /// half written, and must treat a file it cannot parse as absent.
    public static func overwriteInPlace(_ data: Data, at url: URL, sync: Bool = false) throws {
        let fd = open(url.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(description: "cannot open \(url.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = data.withUnsafeBytes { raw -> Int in
            guard let base = raw.baseAddress else { return 0 }
            return pwrite(fd, base, raw.count, 0)
        }
        guard written == data.count, ftruncate(fd, off_t(data.count)) == 0, !sync || fsync(fd) == 0 else {
            throw Failure(description: "cannot write \(url.path) in place: \(String(cString: strerror(errno)))")
        }
    }

    public static func write(_ data: Data, to url: URL, mode: mode_t = 0o644, sync: Bool = true) throws {
        let dir = url.deletingLastPathComponent().path
        let temp = "\(dir)/.\(url.lastPathComponent).\(getpid()).\(UInt32.random(in: 0...UInt32.max)).tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure(description: "cannot create \(temp): \(String(cString: strerror(errno)))") }
        var ok = false
        defer {
            if !ok { unlink(temp) }
        }
        let written = data.withUnsafeBytes { raw -> Bool in
            guard let base = raw.baseAddress else { return true }
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fd, base.advanced(by: offset), raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
        let savedErrno = errno
        // umask may have narrowed the mode open() applied.
        fchmod(fd, mode)
        if !written {
            close(fd)
            throw Failure(description: "cannot write \(temp): \(String(cString: strerror(savedErrno)))")
        }
        if sync && fsync(fd) != 0 {
            let e = errno
            close(fd)
            throw Failure(description: "cannot fsync \(temp): \(String(cString: strerror(e)))")
        }
        close(fd)
        guard rename(temp, url.path) == 0 else {
            throw Failure(description: "cannot rename into \(url.path): \(String(cString: strerror(errno)))")
        }
        ok = true
    }
}
