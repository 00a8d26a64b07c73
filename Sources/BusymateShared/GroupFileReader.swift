import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads a small file of the group directory the way a process that may run
/// as root must: without following a symlink a group member planted, only a
/// regular file, and only up to a size, with an error that names the path
/// and the reason but never the content.
public enum GroupFileReader {
    public struct Failure: Error, CustomStringConvertible, Sendable, Equatable {
        public var description: String
        /// ENOENT: the file is simply not there.
        public var isMissing = false
    }

    public static func read(_ url: URL, limit: Int) throws(Failure) -> Data {
        let path = url.path
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let e = errno
            switch e {
            case ENOENT: throw Failure(description: "\(path) does not exist", isMissing: true)
            case ELOOP: throw Failure(description: "\(path) is a symbolic link; refusing to follow it (replace it with the file itself)")
            case EACCES: throw Failure(description: "\(path): permission denied (the busymate group needs read access; mode 0664 for settings.json)")
            default: throw Failure(description: "cannot open \(path): \(String(cString: strerror(e)))")
            }
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Failure(description: "cannot stat \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else {
            let kind = st.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
            throw Failure(description: "\(path) is \(kind)")
        }
        guard st.st_size <= limit else {
            throw Failure(description: "\(path) is \(byteText(Int(st.st_size))); the limit is \(byteText(limit))")
        }
        // One byte past the limit tells a file that grew since fstat.
        var data = Data(count: limit + 1)
        var total = 0
        let failed: Int32? = data.withUnsafeMutableBytes { raw -> Int32? in
            guard let base = raw.baseAddress else { return nil }
            while total < raw.count {
                let n = Glibc.read(fd, base.advanced(by: total), raw.count - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                if n == 0 { break }
                total += n
            }
            return nil
        }
        if let failed { throw Failure(description: "cannot read \(path): \(String(cString: strerror(failed)))") }
        guard total <= limit else { throw Failure(description: "\(path) is over \(byteText(limit)); the limit is \(byteText(limit))") }
        data.count = total
        return data
    }

    static func byteText(_ bytes: Int) -> String {
        if bytes >= 1 << 20 { return String(format: "%.1f MiB", Double(bytes) / Double(1 << 20)) }
        if bytes >= 1 << 10 { return String(format: "%.1f KiB", Double(bytes) / Double(1 << 10)) }
        return "\(bytes) bytes"
    }
}
