import Crypto
import Foundation

/// The web page's access token: `web-token` in the group, 0640
/// root:busymate, written by the supervisor, read by the web front and by
/// `busymate web url`. 32 random bytes, hex.
public enum WebToken {
    public static let length = 64

    /// The token, or nil when the file is missing or not one.
    public static func read(_ paths: GroupPaths) -> String? {
        guard let data = try? GroupFileReader.read(paths.webToken, limit: 4096) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return isWellFormed(text) ? text : nil
    }

    public static func isWellFormed(_ text: String) -> Bool {
        text.utf8.count == length && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    public static func generate() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { bytes in bytes.map { String(format: "%02x", $0) }.joined() }
    }

    /// Keeps a well-formed token; writes a new one otherwise. Returns the
    /// token in force.
    @discardableResult
    public static func ensure(_ paths: GroupPaths, group: UInt32?) throws -> String {
        // The directory is group-writable: a token a member planted (after
        // the file was removed to rotate it) is not kept.
        if let token = read(paths), isOwnFile(paths) {
            protect(paths, group: group)
            return token
        }
        let token = generate()
        try AtomicFile.write(Data((token + "\n").utf8), to: paths.webToken, mode: 0o640)
        protect(paths, group: group)
        return token
    }

    /// Written by this user (root, installed), a regular file with one link.
    static func isOwnFile(_ paths: GroupPaths) -> Bool {
        var st = stat()
        guard lstat(paths.webToken.path, &st) == 0 else { return false }
        return st.st_mode & S_IFMT == S_IFREG && st.st_uid == geteuid() && st.st_nlink == 1
    }

    /// 0640, and group busymate when running as root: the web front (that
    /// user) reads it; no one else.
    static func protect(_ paths: GroupPaths, group: UInt32?) {
        let fd = open(paths.webToken.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return }
        if geteuid() == 0, let group { fchown(fd, 0, group) }
        fchmod(fd, 0o640)
    }
}
