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
        logger.warning(
            "no POSIX ACL on this file system; the tunnel's user now owns it (0440, group root)",
            metadata: ["PATH": "\(url.path)", "ERROR": "\(String(cString: strerror(errno)))"])
        fchown(fd, uid, 0)
        fchmod(fd, 0o440)
    }

    /// A mirror (the token's, the team database's), whole or not at all:
    /// written to a temporary file that is root's with the tunnel-only ACL
    /// before a byte goes in (the setgid directory would make it group
    /// busymate's), then renamed over the old one.
    static func writeMirror(_ data: Data, to url: URL, reader user: String) throws {
        let temp = url.deletingLastPathComponent().appendingPathComponent(
            ".\(url.lastPathComponent).\(UInt64.random(in: 0...UInt64.max)).tmp")
        let fd = open(temp.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("create \(temp.path)", errno: errno) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(temp.path) }
        }
        if geteuid() == 0, let uid = PrivilegeDrop.lookupUser(user), uid != 0 {
            guard fchown(fd, 0, 0) == 0 else { throw SystemError("chown \(temp.path)", errno: errno) }
            if busymate_acl_owner_and_reader(fd, uid) != 0 {
                // No ACLs here: the tunnel's user owns it, group root, 0400.
                guard fchmod(fd, 0o400) == 0, fchown(fd, uid, 0) == 0 else { throw SystemError("chown \(temp.path)", errno: errno) }
            }
        }
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { raw in raw.baseAddress.map { write(fd, $0 + offset, raw.count - offset) } ?? 0 }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SystemError("write \(temp.path)", errno: errno) }
            offset += n
        }
        guard fsync(fd) == 0 else { throw SystemError("fsync \(temp.path)", errno: errno) }
        guard rename(temp.path, url.path) == 0 else { throw SystemError("rename to \(url.path)", errno: errno) }
        ok = true
    }

    /// A regular file's bytes (at most 64 KiB), never through a link, when
    /// it is root's or `owner`'s (a mirror on a file system without ACLs).
    static func readRootOwned(_ url: URL, orOwnedBy owner: uid_t? = nil) -> Data? {
        try? SecretFile.read(url, owners: [0, geteuid()] + (owner.map { [$0] } ?? []))
    }
}
