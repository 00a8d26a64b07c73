import Foundation

/// Reading a file another process wrote where group members may create
/// files (the group directory): never through a link, never a FIFO or a
/// device, only a file with one name, whose owner is one of `owners`, and
/// no larger than `limit`. What a group member planted is refused.
public enum SecretFile {
    public struct Refused: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Nil when there is no such file.
    public static func read(_ url: URL, owners: [uid_t], limit: Int = 65_536) throws(Refused) -> Data? {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw Refused(description: "cannot open \(url.lastPathComponent): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1 else {
            throw Refused(description: "\(url.lastPathComponent) is not a plain file; ignored")
        }
        guard owners.contains(st.st_uid) else {
            throw Refused(description: "\(url.lastPathComponent) is not the supervisor's (owner uid \(st.st_uid)); ignored")
        }
        guard st.st_size <= limit else { throw Refused(description: "\(url.lastPathComponent) is larger than \(limit) bytes; ignored") }
        var buffer = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < buffer.count {
            let n = buffer.withUnsafeMutableBytes { raw in raw.baseAddress.map { Glibc.read(fd, $0 + got, raw.count - got) } ?? 0 }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Refused(description: "cannot read \(url.lastPathComponent)") }
            got += n
        }
        return Data(buffer)
    }

    /// A mirror the supervisor wrote (`device-jwt.json`, `cloud-postgres.json`),
    /// decoded: root's, or this process's own (a mirror on a file system
    /// without ACLs, a development run). Nil when there is none.
    public static func decode<T: Decodable>(_ type: T.Type, from url: URL, decoder: JSONDecoder) throws(DeviceToken.Problem) -> T? {
        let data: Data
        do {
            guard let read = try read(url, owners: [0, geteuid()]) else { return nil }
            data = read
        } catch {
            throw DeviceToken.Problem(error.description)
        }
        do {
            return try decoder.decode(T.self, from: data)
        } catch {
            throw DeviceToken.Problem("\(url.lastPathComponent) is not what the supervisor writes there")
        }
    }
}
