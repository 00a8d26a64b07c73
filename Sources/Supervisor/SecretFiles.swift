import BusymateShared
import CLinux
import Foundation
import Logging

/// The tunnel's secrets in the group directory (`ca.key`, the device token
/// mirror): root's, 0640 root:root with a POSIX ACL that lets the tunnel's
/// user read them. Group busymate does not: the web front (which serves
/// unauthenticated pages to the LAN) and the CLI's users are in it.
enum SecretFiles {
    static func protect(_ paths: GroupPaths, reader user: String, logger: Logger) {
        guard geteuid() == 0, let uid = PrivilegeDrop.lookupUser(user), uid != 0 else { return }
        for url in [paths.caKey, paths.deviceToken, paths.teamDatabase] {
            protect(url, reader: uid, logger: logger)
        }
    }

    static func protect(_ url: URL, reader uid: uid_t, logger: Logger) {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        // Root's own file only: never one a group member planted, nor a hard link.
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == 0, st.st_nlink == 1 else { return }
        // The ACL before the group: the tunnel can read it all along.
        if busymate_acl_owner_and_reader(fd, uid) == 0 {
            fchown(fd, 0, 0)
            return
        }
        // No ACLs on this file system: the tunnel's user owns it, and root
        // reads it through group root (the unit gives no CAP_DAC_OVERRIDE).
        logger.warning("no POSIX ACL on this file system; the tunnel's user now owns it (0440, group root)",
                       metadata: ["PATH": "\(url.path)", "ERROR": "\(String(cString: strerror(errno)))"])
        fchown(fd, uid, 0)
        fchmod(fd, 0o440)
    }

    /// The token's mirror, whole or not at all: written to a temporary file
    /// that gets the tunnel-only ACL before the rename, so the tunnel never
    /// sees a mirror it cannot read.
    static func writeMirror(_ data: Data, to url: URL, reader user: String) throws {
        let temp = url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp")
        unlink(temp.path)
        let fd = open(temp.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("create \(temp.path)", errno: errno) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(temp.path) }
        }
        let written = data.withUnsafeBytes { raw in raw.baseAddress.map { write(fd, $0, raw.count) } ?? 0 }
        guard written == data.count, fsync(fd) == 0 else { throw SystemError("write \(temp.path)", errno: errno) }
        if geteuid() == 0, let uid = PrivilegeDrop.lookupUser(user), uid != 0 {
            fchmod(fd, 0o640)
            if busymate_acl_owner_and_reader(fd, uid) == 0 {
                fchown(fd, 0, 0)
            } else {
                fchown(fd, uid, 0)
                fchmod(fd, 0o440)
            }
        }
        guard rename(temp.path, url.path) == 0 else { throw SystemError("rename to \(url.path)", errno: errno) }
        ok = true
    }

    /// A root-owned regular file's bytes (at most 64 KiB), never through a link.
    static func readRootOwned(_ url: URL) -> Data? {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_size <= 65_536 else { return nil }
        var buffer = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return n == buffer.count ? Data(buffer) : nil
    }
}
