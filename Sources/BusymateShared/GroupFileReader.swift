import CLinux
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
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            let e = errno
            switch e {
            case ENOENT: throw Failure(description: "\(path) does not exist", isMissing: true)
            case ELOOP: throw Failure(description: "\(path) is a symbolic link; refusing to follow it (replace it with the file itself)")
            case EACCES:
                throw Failure(description: "\(path): permission denied (the busymate group needs read access; mode 0664 for settings.json)")
            default: throw Failure(description: "cannot open \(path): \(String(cString: strerror(e)))")
            }
        }
        defer { close(fd) }
        return try read(fd, path: path, limit: limit)
    }

    /// Reads `name` from `directory` the way root must read a name that a
    /// group-writable row gave: one plain name, opened beneath the directory
    /// (itself not a link) with no link on the way, a regular file.
    public static func read(beneath directory: URL, name: String, limit: Int) throws(Failure) -> Data {
        let fd = try open(beneath: directory, name: name)
        defer { close(fd) }
        return try read(fd, path: directory.appendingPathComponent(name).path, limit: limit)
    }

    /// `length` bytes from `offset` of `name` beneath `directory` (opened as
    /// `read(beneath:)` opens it), and the file's whole size: a window of a
    /// large body without reading the rest.
    public static func read(beneath directory: URL, name: String, offset: Int, length: Int) throws(Failure) -> (data: Data, total: Int) {
        let path = directory.appendingPathComponent(name).path
        let fd = try open(beneath: directory, name: name)
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { throw Failure(description: "\(path) is not a regular file") }
        let total = Int(st.st_size)
        let wanted = max(0, min(length, total - offset))
        var data = Data(count: wanted)
        var got = 0
        while got < wanted {
            let (n, failed): (Int, Int32?) = data.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return (0, nil) }
                while true {
                    let n = pread(fd, base.advanced(by: got), wanted - got, off_t(offset + got))
                    if n < 0 && errno == EINTR { continue }
                    return n < 0 ? (0, errno) : (n, nil)
                }
            }
            if let failed { throw Failure(description: "cannot read \(path): \(String(cString: strerror(failed)))") }
            if n == 0 { break }
            got += n
        }
        data.count = got
        return (data, total)
    }

    private static func open(beneath directory: URL, name: String) throws(Failure) -> Int32 {
        let path = directory.appendingPathComponent(name).path
        guard isPlainName(name) else {
            throw Failure(description: "\"\(name)\" is not a file name in \(directory.path) (it leaves the directory)")
        }
        let dir = Glibc.open(directory.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard dir >= 0 else {
            let e = errno
            throw Failure(
                description: e == ELOOP || e == ENOTDIR
                    ? "\(directory.path) is not a directory (a link?); refusing it"
                    : "cannot open \(directory.path): \(String(cString: strerror(e)))", isMissing: e == ENOENT)
        }
        defer { close(dir) }
        let fd = busymate_open_beneath(dir, name)
        guard fd >= 0 else {
            let e = errno
            switch e {
            case ENOENT: throw Failure(description: "\(path) does not exist", isMissing: true)
            case ELOOP, EXDEV: throw Failure(description: "\(path) is a symbolic link or leaves \(directory.path); refusing to follow it")
            default: throw Failure(description: "cannot open \(path): \(String(cString: strerror(e)))")
            }
        }
        // A hard link (of a file a group member could link) is no body the tunnel wrote.
        var st = stat()
        if fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_nlink != 1 {
            close(fd)
            throw Failure(description: "\(path) has \(st.st_nlink) names (a hard link); refusing it")
        }
        return fd
    }

    /// One path component, not `.` or `..`, no NUL.
    public static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && name.utf8.count <= 255 && !name.utf8.contains(UInt8(ascii: "/"))
            && !name.utf8.contains(0)
    }

    private static func read(_ fd: Int32, path: String, limit: Int) throws(Failure) -> Data {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw Failure(description: "cannot stat \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFREG else {
            let kind = st.st_mode & S_IFMT == S_IFDIR ? "a directory" : "not a regular file"
            throw Failure(description: "\(path) is \(kind)")
        }
        guard st.st_size <= limit else {
            throw Failure(description: "\(path) is \(byteText(Int(st.st_size))); the limit is \(byteText(limit))")
        }
        // Sized by fstat, grown while the file goes on; one byte past the limit tells a file that grew too far.
        var data = Data(count: min(limit, max(Int(st.st_size), 0)) + 1)
        var total = 0
        while true {
            let (n, failed): (Int, Int32?) = data.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return (0, nil) }
                while true {
                    let n = Glibc.read(fd, base.advanced(by: total), raw.count - total)
                    if n < 0 && errno == EINTR { continue }
                    return n < 0 ? (0, errno) : (n, nil)
                }
            }
            if let failed { throw Failure(description: "cannot read \(path): \(String(cString: strerror(failed)))") }
            if n == 0 { break }
            total += n
            guard total <= limit else { throw Failure(description: "\(path) is over \(byteText(limit)); the limit is \(byteText(limit))") }
            if total == data.count { data.count = min(limit + 1, data.count * 2) }
        }
        data.count = total
        return data
    }

    static func byteText(_ bytes: Int) -> String {
        if bytes >= 1 << 20 { return String(format: "%.1f MiB", Double(bytes) / Double(1 << 20)) }
        if bytes >= 1 << 10 { return String(format: "%.1f KiB", Double(bytes) / Double(1 << 10)) }
        return "\(bytes) bytes"
    }
}
