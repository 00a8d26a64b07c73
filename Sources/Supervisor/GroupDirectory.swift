import BusymateShared
import Foundation
import Logging

/// Creates the group directory from the skeleton and gives every part the
/// owner and mode DESIGN fixes, so the tunnel (group busymate) can read
/// `ca.key` and write the store, and nothing more.
enum GroupDirectory {
    static let readme = """
        # Busymate group directory

        Shared by `busymate-app` (the supervisor), `busymate-tunnel` and
        `busymate-web`. Edit `settings.json` with any editor: every process
        applies a save within a second. Everything else here is written by the
        processes themselves.

        | path | what |
        |---|---|
        | settings.json | all settings (hot-reloaded) |
        | ca.pem, ca.der, ca.key | the interception CA (the key is never world-readable) |
        | status.json | the tunnel's live status |
        | notify/ | notification sockets, one per process |
        | control.sock | the supervisor's control socket (for the `busymate` CLI) |
        | capture.sqlite, bodies/ | the capture store |
        | open-exchanges.json | the exchanges in flight (the tunnel's live set) |
        | web-token | the web page's access token (`busymate web url`) |

        """

    static func prepare(_ paths: GroupPaths, webUser: String, logger: Logger) throws {
        let fm = FileManager.default
        try fm.createDirectory(at: paths.root, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.notifyDirectory, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.bodies, withIntermediateDirectories: true)
        try fm.createDirectory(at: paths.privateDirectory, withIntermediateDirectories: true)
        if !fm.fileExists(atPath: paths.settings.path) {
            try AtomicFile.write(Data(AppSettings.defaultDocument.utf8), to: paths.settings, mode: 0o664)
            logger.info("created settings.json from the skeleton", metadata: ["PATH": "\(paths.settings.path)"])
        }
        if !fm.fileExists(atPath: paths.readme.path) {
            try AtomicFile.write(Data(readme.utf8), to: paths.readme, mode: 0o644)
        }
        let group = PrivilegeDrop.lookupGroup("busymate")
        let asRoot = geteuid() == 0
        // setgid: new files get group busymate; sticky: only a file's owner
        // may replace it, so the tunnel cannot swap the CA.
        apply(paths.root, mode: 0o3775, group: group, asRoot: asRoot)
        apply(paths.notifyDirectory, mode: 0o3770, group: group, asRoot: asRoot)
        apply(paths.bodies, mode: 0o3770, group: group, asRoot: asRoot)
        apply(paths.settings, mode: settingsMode(paths), group: group, asRoot: asRoot)
        apply(paths.privateDirectory, mode: 0o700, group: asRoot ? 0 : nil, asRoot: asRoot)
        if asRoot && group == nil {
            logger.warning(
                "group busymate does not exist; the tunnel cannot drop privileges until it does (systemd-sysusers units/busymate.sysusers)")
        }
        if asRoot {
            if let webUID = PrivilegeDrop.lookupUser(webUser) {
                handOver(paths.onboarding, to: webUID)
            } else {
                logger.warning(
                    "user \(webUser) does not exist; the web front cannot start until it does (systemd-sysusers units/busymate.sysusers)")
            }
        }
    }

    /// A file the web front writes by rename, left by one that ran as the
    /// tunnel's user (before it had a user of its own): in the sticky group
    /// directory only the file's owner may replace it.
    static func handOver(_ url: URL, to uid: uid_t) {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1, st.st_uid != 0, st.st_uid != uid else { return }
        fchown(fd, uid, UInt32.max)
    }

    /// Only a regular file or directory, never through a symlink a group
    /// member planted (this runs as root).
    static func apply(_ url: URL, mode: mode_t, group: UInt32?, asRoot: Bool) {
        let fd = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG || st.st_mode & S_IFMT == S_IFDIR else { return }
        if asRoot, let group { fchown(fd, 0, group) }
        fchmod(fd, mode)
    }

    /// settings.json is 0664, but 0660 while it holds a password
    /// (`upstream_proxy.password`): no secret in a world-readable file.
    static func settingsMode(_ paths: GroupPaths) -> mode_t {
        guard let data = try? GroupFileReader.read(paths.settings, limit: SettingsFile.sizeLimit) else { return 0o664 }
        return data.range(of: Data("\"password\"".utf8)) == nil ? 0o664 : 0o660
    }

    /// After each save: an editor's write-and-rename brings back its own mode.
    static func protectSettings(_ paths: GroupPaths) {
        let mode = settingsMode(paths)
        let fd = open(paths.settings.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_mode & 0o777 != mode else { return }
        // Tighten only: a file a person made 0640 stays so.
        if mode == 0o660, st.st_mode & 0o007 != 0 { fchmod(fd, (st.st_mode & 0o770) | 0o660) }
    }

    /// Why the tunnel's user could not use the group directory, or nil.
    /// DESIGN: every directory above it must be reachable by that user; a
    /// 0700 parent gave a tunnel with no store, no CA and no status.
    static func reachabilityProblem(_ paths: GroupPaths, identity: TunnelIdentity) -> String? {
        guard geteuid() == 0 else { return nil }
        guard let uid = PrivilegeDrop.lookupUser(identity.user), let gid = PrivilegeDrop.lookupGroup(identity.group) else {
            return nil  // the tunnel says so itself, with how to create them
        }
        var directories: [String] = []
        var url = paths.root.standardizedFileURL
        while true {
            directories.insert(url.path, at: 0)
            let parent = url.deletingLastPathComponent()
            if parent.path == url.path || url.path == "/" { break }
            url = parent
        }
        for (i, path) in directories.enumerated() {
            var st = stat()
            guard stat(path, &st) == 0 else { return "\(path): \(String(cString: strerror(errno)))" }
            // The group directory itself needs read and write too.
            let isGroupDirectory = i == directories.count - 1
            let need: mode_t = isGroupDirectory ? 0o7 : 0o1
            let bits: mode_t = st.st_uid == uid ? (st.st_mode >> 6) & 0o7 : st.st_gid == gid ? (st.st_mode >> 3) & 0o7 : st.st_mode & 0o7
            if bits & need != need {
                let owner = "\(name(ofUser: st.st_uid)):\(name(ofGroup: st.st_gid))"
                let what = isGroupDirectory ? "read, write and enter" : "enter"
                return
                    "user \(identity.user) (group \(identity.group)) cannot \(what) \(path) (mode \(String(st.st_mode & 0o7777, radix: 8)), owner \(owner)); "
                    + "the tunnel runs as that user and needs every directory above the group directory to be searchable (chmod o+x or g+x \(path), or move the group directory)"
            }
        }
        return nil
    }

    private static func name(ofUser uid: uid_t) -> String {
        guard let entry = getpwuid(uid) else { return "\(uid)" }
        return String(cString: entry.pointee.pw_name)
    }

    private static func name(ofGroup gid: gid_t) -> String {
        guard let entry = getgrgid(gid) else { return "\(gid)" }
        return String(cString: entry.pointee.gr_name)
    }
}
